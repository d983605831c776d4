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
	"flag"
	"fmt"
	"strings"
)

// Command is one command line of a binary: its name as typed, the text its
// --help prints before the flag list, and its flag set, the one it parses.
type Command struct {
	Name     string
	Synopsis string
	Flags    *flag.FlagSet
}

// Flags renders the reference of commands' flags: per command its --help
// synopsis and a table of every flag with type, default and usage.
func Flags(binary string, cmds []Command) (string, error) {
	var b strings.Builder
	b.WriteString(GeneratedNotice)
	fmt.Fprintf(&b, "\n# %s flags\n\n", binary)
	fmt.Fprintf(&b, "Every flag of `%s` and its subcommands, generated from the flag sets the binary parses.\n"+
		"A flag is written `--name value` or `--name=value` (one dash works too); a boolean flag is set with\n"+
		"`--name` or `--name=false`. Durations take Go's syntax: `90s`, `10m`, `1h30m`.\n\n", binary)
	for _, c := range cmds {
		fmt.Fprintf(&b, "- [`%s`](#%s)\n", c.Name, anchor(c.Name))
	}
	for _, c := range cmds {
		syn, err := Public(c.Synopsis)
		if err != nil {
			return "", fmt.Errorf("docgen: %s: %w", c.Name, err)
		}
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s\n```\n\n", Code(c.Name), strings.TrimSpace(syn))
		var rows [][]string
		var ferr error
		c.Flags.VisitAll(func(f *flag.Flag) {
			usage, err := Public(f.Usage)
			if err != nil && ferr == nil {
				ferr = fmt.Errorf("docgen: %s --%s: %w", c.Name, f.Name, err)
			}
			rows = append(rows, []string{Code("--" + f.Name), flagType(f), escapeCell(defaultText(f)), Cell(usage)})
		})
		if ferr != nil {
			return "", ferr
		}
		if len(rows) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		b.WriteString(table([]string{"Flag", "Type", "Default", "Description"}, rows))
	}
	return b.String(), nil
}

// flagType names the value a flag takes. The flag package's value types are
// unexported, so they are told apart by name; a flag defined with Func or a
// Value of our own is a string to the user.
func flagType(f *flag.Flag) string {
	if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
		return "bool"
	}
	switch fmt.Sprintf("%T", f.Value) {
	case "*flag.intValue":
		return "int"
	case "*flag.int64Value":
		return "int64"
	case "*flag.uintValue":
		return "uint"
	case "*flag.uint64Value":
		return "uint64"
	case "*flag.float64Value":
		return "float"
	case "*flag.durationValue":
		return "duration"
	}
	return "string"
}

// defaultText is the default as a user would type it; none for an empty
// string (the flag's usage says what empty means).
func defaultText(f *flag.Flag) string {
	if f.DefValue == "" {
		return ""
	}
	return Code(f.DefValue)
}

// anchor is the heading id GitHub derives from a heading holding only name
// in a code span.
func anchor(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
