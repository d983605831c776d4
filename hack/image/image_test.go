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
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const testCAFile = "/etc/ssl/certs/ca-certificates.crt"

// TestImage_ChartDefaultIsWhatMakeImageNames: `helm install` with default
// values pulls exactly the reference `make image` builds, or the install
// ends in ImagePullBackOff.
func TestImage_ChartDefaultIsWhatMakeImageNames(t *testing.T) {
	tag, err := ChartAppVersion(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	built := Spec{Repository: DefaultRepository, Tag: tag}.Reference()
	chart, err := ChartDefaultImage(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if chart != built {
		t.Fatalf("the chart deploys %s by default, make image builds %s", chart, built)
	}
}

// TestImage_TarballIsRunnableNonRootAndShellFree builds the image as `make
// image` does, reopens the tarball with go-containerregistry and checks what
// a cluster relies on: the non-root user the chart's securityContext
// expects, the entrypoint, the labels, a CA bundle (https:// members), no
// shell (nothing to exec into), and static binaries that answer --version.
func TestImage_TarballIsRunnableNonRootAndShellFree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binaries are linux binaries: run on linux")
	}
	root := repoRoot(t)
	const version = "v0.0.0-imagetest"
	s := Spec{Root: root, Repository: DefaultRepository, Tag: "imagetest", Version: version, Revision: "0123456789abcdef",
		Source: "https://github.com/projection-recovery/projection-recovery", CAFile: testCAFile, Arch: runtime.GOARCH,
		Created: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	img, err := Build(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), TarballName)
	if err := Write(out, s.Reference(), img); err != nil {
		t.Fatal(err)
	}

	// From here on only the tarball is read, as a registry or `docker load` would.
	loaded, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("opening %s: %v", out, err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("config", func(t *testing.T) {
		if cf.Config.User != "65532:65532" {
			t.Errorf("user = %q, want 65532:65532", cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/manager"}) {
			t.Errorf("entrypoint = %q, want [/manager]", cf.Config.Entrypoint)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("platform = %s/%s", cf.OS, cf.Architecture)
		}
		want := map[string]string{
			"org.opencontainers.image.title":    "projection-recovery",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": "0123456789abcdef",
			"org.opencontainers.image.source":   s.Source,
			"org.opencontainers.image.licenses": "Apache-2.0",
		}
		for k, v := range want {
			if got := cf.Config.Labels[k]; got != v {
				t.Errorf("label %s = %q, want %q", k, got, v)
			}
		}
	})

	files := filesOf(t, loaded)
	t.Run("filesystem", func(t *testing.T) {
		var names []string
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		// The whole filesystem: anything more (a shell, a package manager,
		// a libc) is surface the image was built not to have.
		wantFiles := []string{"etc/group", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", "manager", "member"}
		if !slices.Equal(names, wantFiles) {
			t.Errorf("regular files = %q, want %q", names, wantFiles)
		}
		ca, err := os.ReadFile(testCAFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, ca) {
			t.Error("the image's CA bundle differs from the build machine's")
		}
		if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") ||
			!strings.Contains(string(files["etc/group"].data), "nonroot:x:65532:") {
			t.Errorf("passwd/group lack the nonroot user:\n%s%s", files["etc/passwd"].data, files["etc/group"].data)
		}
	})
	t.Run("no shell", func(t *testing.T) {
		for n, f := range files {
			switch path.Base(n) {
			case "sh", "bash", "ash", "dash", "zsh", "busybox":
				t.Errorf("%s is a shell", n)
			}
			if f.mode&0o111 != 0 && n != "manager" && n != "member" {
				t.Errorf("%s is executable", n)
			}
		}
	})
	for _, bin := range []string{"manager", "member"} {
		t.Run(bin, func(t *testing.T) {
			f := files[bin]
			if f.uid != 0 || f.mode&0o022 != 0 {
				t.Errorf("/%s: uid %d mode %o; the runtime user must not be able to replace it", bin, f.uid, f.mode)
			}
			p := filepath.Join(t.TempDir(), bin)
			if err := os.WriteFile(p, f.data, 0o755); err != nil {
				t.Fatal(err)
			}
			assertStatic(t, p)
			got, err := exec.Command(p, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("/%s --version: %v\n%s", bin, err, got)
			}
			if want := bin + " " + version; !strings.HasPrefix(string(got), want) {
				t.Errorf("/%s --version = %q, want it to start with %q", bin, got, want)
			}
		})
	}

	layers, err := loaded.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		size += n
	}
	t.Logf("image %s: %d layer(s), %.1f MiB compressed", s.Reference(), len(layers), float64(size)/(1<<20))
}

type imageFile struct {
	data     []byte
	mode     int64
	uid, gid int
}

// filesOf reads the flattened filesystem of img: every regular file, with
// its content and owner. A symlink or device would be reported as a failure.
func filesOf(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]imageFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "/")
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = imageFile{data: data, mode: h.Mode, uid: h.Uid, gid: h.Gid}
		default:
			t.Errorf("%s: unexpected entry type %q", name, h.Typeflag)
		}
	}
}

// assertStatic: a binary with a program interpreter (the dynamic loader)
// cannot start on an empty base, which has no /lib.
func assertStatic(t *testing.T, p string) {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", filepath.Base(p))
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}
