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

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// DefaultRepository is where the image is published; the chart's default
// image.repository names the same (a test holds them together).
const DefaultRepository = "ghcr.io/projection-recovery/projection-recovery"

// ChartPath is the chart whose appVersion is the image's default tag.
const ChartPath = "charts/projection-recovery"

// The non-root identity of distroless' "nonroot" user. Both the image config
// and the chart's securityContext use it; a different uid in one of them
// would make runAsNonRoot pods fail to start or run as an unnamed user.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// Spec is everything that varies between two builds of the image.
type Spec struct {
	// Root is the repository checkout (go.mod, cmd/, charts/).
	Root string
	// Repository and Tag name the image.
	Repository, Tag string
	// Version is stamped into both binaries (-X main.version) and shown by --version.
	Version string
	// Revision is the VCS commit the image is built from ("" when unknown).
	Revision string
	// Source is the URL of the source repository (OCI label).
	Source string
	// CAFile is the PEM bundle copied to /etc/ssl/certs/ca-certificates.crt.
	CAFile string
	// Arch is the GOARCH of the binaries and of the image config.
	Arch string
	// Created stamps the config and every file, so two builds of one commit
	// are byte-identical (the digest then says which source it came from).
	Created time.Time
}

// Reference is the image reference the spec names.
func (s Spec) Reference() string { return s.Repository + ":" + s.Tag }

// binaries are the programs in the image, at the root of its filesystem.
// The manager is the entrypoint; the member (the reference member) runs from
// the same image with command: ["/member"].
var binaries = []struct{ name, pkg string }{
	{"manager", "./cmd/manager"},
	{"member", "./cmd/member"},
}

// chartFile is the part of Chart.yaml and values.yaml the image names.
type chartFile struct {
	AppVersion string `json:"appVersion"`
	Image      struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"image"`
}

func readYAML(path string) (chartFile, error) {
	var c chartFile
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("parsing %s: %w", path, err)
	}
	return c, nil
}

// ChartAppVersion is the appVersion of the chart: the default tag of both
// `make image` and the chart's Deployment.
func ChartAppVersion(root string) (string, error) {
	c, err := readYAML(filepath.Join(root, ChartPath, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	if c.AppVersion == "" {
		return "", fmt.Errorf("%s/Chart.yaml has no appVersion", ChartPath)
	}
	return c.AppVersion, nil
}

// ChartDefaultImage is the image the chart deploys with default values:
// image.repository and image.tag, or the appVersion when the tag is empty.
func ChartDefaultImage(root string) (string, error) {
	v, err := readYAML(filepath.Join(root, ChartPath, "values.yaml"))
	if err != nil {
		return "", err
	}
	tag := v.Image.Tag
	if tag == "" {
		if tag, err = ChartAppVersion(root); err != nil {
			return "", err
		}
	}
	return v.Image.Repository + ":" + tag, nil
}

// buildBinaries compiles the binaries static (CGO_ENABLED=0: an empty base
// has no libc), reproducible (-trimpath: no build-machine paths) and stamped
// with the version, into dir.
func buildBinaries(ctx context.Context, s Spec, dir string) error {
	for _, b := range binaries {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
			"-ldflags", "-s -w -X main.version="+s.Version,
			"-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = s.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+s.Arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// entry is one file or directory of the image's single layer.
type entry struct {
	path     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// passwd and group name root and the non-root user; without them the user
// has no name or home, and tools that resolve the uid (or a HOME-relative
// cache) fail.
func passwd() []byte {
	return fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n",
		nonrootName, nonrootUID, nonrootUID, nonrootName, nonrootName)
}

func group() []byte {
	return fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", nonrootName, nonrootUID)
}

// layerEntries lists the whole filesystem: nothing else is in the image (no
// shell, no package manager, no libc). Binaries belong to root and are not
// writable by the user the container runs as.
func layerEntries(binDir, caFile string) ([]entry, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle (install Debian's ca-certificates): %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	es := []entry{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: passwd()},
		{path: "etc/group", mode: 0o644, data: group()},
		{path: "etc/ssl/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{path: "home/", mode: 0o755, dir: true},
		{path: "home/" + nonrootName + "/", mode: 0o700, dir: true, uid: nonrootUID, gid: nonrootUID},
		{path: "tmp/", mode: 0o1777, dir: true},
	}
	for _, b := range binaries {
		data, err := os.ReadFile(filepath.Join(binDir, b.name))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{path: b.name, mode: 0o755, data: data})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	return es, nil
}

// layerTar writes the entries as one tar stream, every header stamped with
// the same time and no user/group names, so the bytes depend on the content only.
func layerTar(es []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Build compiles the binaries and assembles the image on an empty base: one
// layer, OCI media types, the non-root user and the OCI labels.
func Build(ctx context.Context, s Spec) (v1.Image, error) {
	binDir, err := os.MkdirTemp("", "projection-recovery-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	if err := buildBinaries(ctx, s, binDir); err != nil {
		return nil, err
	}
	es, err := layerEntries(binDir, s.CAFile)
	if err != nil {
		return nil, err
	}
	return imageOf(es, s.Created, s.Arch, "hack/image: static manager and member on an empty base", s.Version, v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootUID, nonrootUID),
		Entrypoint: []string{"/manager"},
		WorkingDir: "/",
		Env:        []string{"PATH=/", "HOME=/home/" + nonrootName, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels:     labels(s),
	})
}

// imageOf assembles one layer of es on an empty base with cfg: OCI media
// types, every file and the config stamped with created.
func imageOf(es []entry, created time.Time, arch, createdBy, comment string, cfg v1.Config) (v1.Image, error) {
	raw, err := layerTar(es, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("creating the layer: %w", err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: createdBy, Comment: comment},
	})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: created}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// labels are the OCI annotations registries and scanners read
// (github.com/opencontainers/image-spec annotations.md).
func labels(s Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "projection-recovery",
		"org.opencontainers.image.description": "Kubernetes operator that makes a SQL projection provably complete again (manager; /member is the reference member)",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
	}
	if s.Source != "" {
		l["org.opencontainers.image.source"] = s.Source
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	return l
}

// Write stores img as a tarball under ref at path: the format `docker load`,
// `podman load`, `kind load image-archive` and `crane push` read.
func Write(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// gitOutput runs git in root and returns its trimmed output, "" when git or
// the checkout is unavailable (a source tarball builds too, unlabelled).
func gitOutput(root string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// countBytes drains rc and returns how many bytes it held.
func countBytes(rc io.ReadCloser) (int64, error) {
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
