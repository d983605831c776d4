/*
Copyright 2026 The projection-recovery Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package docgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRDs renders the reference of the CustomResourceDefinitions in files
// (controller-gen's YAML, one CRD a file): for every kind and served
// version, each field of each top-level section (spec, status) with its
// path, type, default, validation and description. Nothing is written by
// hand: a field added to api/ appears once `make manifests` regenerated
// the YAML.
func CRDs(files [][]byte) (string, error) {
	crds := make([]apiextv1.CustomResourceDefinition, 0, len(files))
	for i, f := range files {
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(f, &crd); err != nil {
			return "", fmt.Errorf("docgen: CRD file %d: %w", i, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return "", fmt.Errorf("docgen: CRD file %d holds a %q, not a CustomResourceDefinition", i, crd.Kind)
		}
		crds = append(crds, crd)
	}
	slices.SortFunc(crds, func(a, b apiextv1.CustomResourceDefinition) int {
		return strings.Compare(a.Spec.Names.Kind, b.Spec.Names.Kind)
	})

	var b strings.Builder
	b.WriteString(GeneratedNotice)
	b.WriteString("\n# Custom resources\n\n")
	b.WriteString("Every field of the operator's custom resources, generated from the CustomResourceDefinitions in\n" +
		"`config/crd/bases/` (the chart installs the same files). The API server enforces the Validation column\n" +
		"when an object is created or updated; a rule's entry is the message it answers with.\n\n")
	for _, crd := range crds {
		fmt.Fprintf(&b, "- [%s](#%s)\n", crd.Spec.Names.Kind, strings.ToLower(crd.Spec.Names.Kind))
	}
	for _, crd := range crds {
		if err := renderCRD(&b, crd); err != nil {
			return "", fmt.Errorf("docgen: %s: %w", crd.Spec.Names.Kind, err)
		}
	}
	return b.String(), nil
}

func renderCRD(b *strings.Builder, crd apiextv1.CustomResourceDefinition) error {
	n := crd.Spec.Names
	fmt.Fprintf(b, "\n## %s\n\n", n.Kind)
	fmt.Fprintf(b, "- Group: %s\n- Scope: %s\n- Plural: %s\n", Code(crd.Spec.Group), crd.Spec.Scope, Code(n.Plural))
	if len(n.ShortNames) > 0 {
		fmt.Fprintf(b, "- Short names: %s\n", codes(n.ShortNames))
	}
	if len(n.Categories) > 0 {
		fmt.Fprintf(b, "- Categories: %s\n", codes(n.Categories))
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		fmt.Fprintf(b, "\n### %s/%s\n\n", crd.Spec.Group, v.Name)
		if v.Storage {
			b.WriteString("The storage version.")
		}
		if v.Deprecated {
			b.WriteString(" Deprecated.")
		}
		if v.Storage || v.Deprecated {
			b.WriteString("\n\n")
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		root := v.Schema.OpenAPIV3Schema
		desc, err := Public(root.Description)
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimSpace(desc) + "\n")
		if len(v.AdditionalPrinterColumns) > 0 {
			b.WriteString("\nColumns of `kubectl get` (`-o wide` adds those of priority 1 and more):\n\n")
			var rows [][]string
			for _, c := range v.AdditionalPrinterColumns {
				rows = append(rows, []string{c.Name, c.Type, Code(c.JSONPath), strconv.Itoa(int(c.Priority))})
			}
			b.WriteString(table([]string{"Column", "Type", "JSON path", "Priority"}, rows))
		}
		if err := rules(b, "the object", root.XValidations); err != nil {
			return err
		}
		for _, section := range sortedKeys(root.Properties) {
			if section == "apiVersion" || section == "kind" {
				continue
			}
			s := root.Properties[section]
			if section == "metadata" && len(s.Properties) == 0 && len(s.XValidations) == 0 {
				continue // the standard ObjectMeta, unconstrained
			}
			var rows [][]string
			if err := fieldRows(&rows, section, s, slices.Contains(root.Required, section)); err != nil {
				return err
			}
			fmt.Fprintf(b, "\n#### %s\n\n", Code(section))
			b.WriteString(table([]string{"Field", "Type", "Default", "Validation", "Description"}, rows))
		}
	}
	return nil
}

// rules lists the CEL rules of an object that has no row of its own.
func rules(b *strings.Builder, what string, vs apiextv1.ValidationRules) error {
	if len(vs) == 0 {
		return nil
	}
	fmt.Fprintf(b, "\nRules on %s:\n\n", what)
	for _, v := range vs {
		s, err := ruleText(v)
		if err != nil {
			return err
		}
		b.WriteString("- " + s + "\n")
	}
	return nil
}

// fieldRows appends the row of the field at path and of every field below
// it, depth first in name order.
func fieldRows(rows *[][]string, path string, s apiextv1.JSONSchemaProps, required bool) error {
	desc, err := Public(s.Description)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	val, err := validation(s, required)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	def := ""
	if s.Default != nil {
		def = Code(string(s.Default.Raw))
	}
	*rows = append(*rows, []string{Code(path), Cell(typeName(s)), escapeCell(def), escapeCell(strings.Join(val, "<br>")), Cell(desc)})
	for _, name := range sortedKeys(s.Properties) {
		if err := fieldRows(rows, path+"."+name, s.Properties[name], slices.Contains(s.Required, name)); err != nil {
			return err
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		it := *s.Items.Schema
		for _, name := range sortedKeys(it.Properties) {
			if err := fieldRows(rows, path+"[]."+name, it.Properties[name], slices.Contains(it.Required, name)); err != nil {
				return err
			}
		}
		if len(it.Properties) == 0 && (len(it.XValidations) > 0 || it.Description != "") {
			if err := fieldRows(rows, path+"[]", it, false); err != nil {
				return err
			}
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		it := *s.AdditionalProperties.Schema
		for _, name := range sortedKeys(it.Properties) {
			if err := fieldRows(rows, path+".*."+name, it.Properties[name], slices.Contains(it.Required, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// typeName is the field's type as a reader writes it: integer (int32),
// string (date-time), []object, map[string]string.
func typeName(s apiextv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString:
		return "int-or-string"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeName(*s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeName(*s.AdditionalProperties.Schema)
	case s.Type == "object" && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return "object (any fields)"
	case s.Format != "":
		return s.Type + " (" + s.Format + ")"
	}
	return s.Type
}

// validation lists what the API server checks of the field.
func validation(s apiextv1.JSONSchemaProps, required bool) ([]string, error) {
	var out []string
	if required {
		out = append(out, "required")
	}
	if s.Nullable {
		out = append(out, "may be null")
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = Code(strings.Trim(string(e.Raw), `"`))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	bound := func(name string, v *float64, exclusive bool) {
		if v == nil {
			return
		}
		op := map[bool]map[string]string{false: {"minimum": "≥", "maximum": "≤"}, true: {"minimum": ">", "maximum": "<"}}[exclusive][name]
		out = append(out, op+" "+strconv.FormatFloat(*v, 'f', -1, 64))
	}
	bound("minimum", s.Minimum, s.ExclusiveMinimum)
	bound("maximum", s.Maximum, s.ExclusiveMaximum)
	count := func(what string, lo, hi *int64) {
		switch {
		case lo != nil && hi != nil && *lo == *hi:
			out = append(out, fmt.Sprintf("exactly %d %s", *lo, what))
		case lo != nil && hi != nil:
			out = append(out, fmt.Sprintf("%d to %d %s", *lo, *hi, what))
		case lo != nil:
			out = append(out, fmt.Sprintf("at least %d %s", *lo, what))
		case hi != nil:
			out = append(out, fmt.Sprintf("at most %d %s", *hi, what))
		}
	}
	count("characters", s.MinLength, s.MaxLength)
	count("items", s.MinItems, s.MaxItems)
	count("properties", s.MinProperties, s.MaxProperties)
	if s.UniqueItems {
		out = append(out, "unique items")
	}
	if s.Pattern != "" {
		out = append(out, "matches "+Code(s.Pattern))
	}
	if s.XListType != nil {
		lt := "list type " + Code(*s.XListType)
		if len(s.XListMapKeys) > 0 {
			lt += ", keyed by " + codes(s.XListMapKeys)
		}
		out = append(out, lt)
	}
	if s.XMapType != nil {
		out = append(out, "map type "+Code(*s.XMapType))
	}
	for _, v := range s.XValidations {
		r, err := ruleText(v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ruleText is a CEL rule as a reader meets it: its message when it has one
// (what the API server answers), the rule itself otherwise.
func ruleText(v apiextv1.ValidationRule) (string, error) {
	text := "rule " + Code(strings.Join(strings.Fields(v.Rule), " "))
	switch {
	case v.Message != "":
		m, err := Public(v.Message)
		if err != nil {
			return "", err
		}
		text = "“" + m + "”"
	case v.MessageExpression != "":
		text = "rule " + Code(strings.Join(strings.Fields(v.Rule), " ")) + ", message " + Code(v.MessageExpression)
	}
	if v.FieldPath != "" {
		text += " (on " + Code(v.FieldPath) + ")"
	}
	return text, nil
}

func codes(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Code(s)
	}
	return strings.Join(out, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
