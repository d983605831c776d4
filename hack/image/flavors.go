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
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The two images of the e2e node (hack/cluster.sh, docs/e2e.md) besides the
// project's own: no registry is reachable there, so the pod sandbox's pause
// image and the local profile's PostgreSQL are built here too. Neither is
// published; the chart's default PostgreSQL stays the official image.

// pgUID is the uid the chart's local PostgreSQL pod runs as (runAsUser: 999,
// the official image's postgres user); initdb refuses a uid without a name.
const pgUID = 999

// buildStatic compiles pkg static (an empty base has no libc) into out.
func buildStatic(ctx context.Context, root, arch, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// BuildPause is the pod sandbox image: /pause alone, as an unprivileged user.
func BuildPause(ctx context.Context, s Spec) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "pause-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := buildStatic(ctx, s.Root, s.Arch, "./hack/image/pause", filepath.Join(dir, "pause")); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "pause"))
	if err != nil {
		return nil, err
	}
	es := []entry{{path: "pause", mode: 0o755, data: data}}
	return imageOf(es, s.Created, s.Arch, "hack/image: pause", s.Version, cfgOf("65535:65535", []string{"/pause"}, nil))
}

// pgBinaries are the Debian PostgreSQL programs the server, initdb, psql and
// pg_isready (the chart's readiness probe) need, under bindir's version.
var pgBinaries = []string{"postgres", "initdb", "pg_ctl", "pg_isready", "psql"}

// BuildPostgres is PostgreSQL from this machine's Debian packages (postgresql-N)
// with every shared library they load, an /etc/passwd naming uid 999, and
// hack/image/pgentry as the entrypoint.
func BuildPostgres(ctx context.Context, s Spec) (v1.Image, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return nil, fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres: install Debian's postgresql (hack/postgres.sh does)")
	}
	sort.Strings(bins)
	pgDir := filepath.Dir(filepath.Dir(bins[len(bins)-1])) // /usr/lib/postgresql/N
	version := filepath.Base(pgDir)
	shareDir := "/usr/share/postgresql/" + version

	dir, err := os.MkdirTemp("", "postgres-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	entrypoint := filepath.Join(dir, "pgentry")
	if err := buildStatic(ctx, s.Root, s.Arch, "./hack/image/pgentry", entrypoint); err != nil {
		return nil, err
	}

	files := map[string]bool{}
	var elves []string
	for _, b := range pgBinaries {
		p := filepath.Join(pgDir, "bin", b)
		files[p], elves = true, append(elves, p)
	}
	// initdb runs the bootstrap backend through popen(3), that is /bin/sh
	// (Debian's dash): without it initdb fails with "popen failure".
	files["/bin/sh"], elves = true, append(elves, "/bin/sh")
	libs, _ := filepath.Glob(filepath.Join(pgDir, "lib", "*.so"))
	for _, l := range libs {
		if strings.HasPrefix(filepath.Base(l), "llvmjit") {
			continue // JIT only: it loads LLVM, over 100 MiB the server runs without
		}
		files[l], elves = true, append(elves, l)
	}
	if err := filepath.Walk(shareDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && info.Name() == "man" {
			return filepath.SkipDir
		}
		if info.Mode().IsRegular() {
			files[p] = true
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", shareDir, err)
	}
	for _, z := range []string{"/usr/share/zoneinfo/UTC", "/usr/share/zoneinfo/Etc/UTC", "/usr/share/zoneinfo/GMT"} {
		files[z] = true
	}
	deps, err := sharedLibraries(elves)
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		files[d] = true
	}

	dirs := map[string]bool{}
	es := []entry{
		{path: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\npostgres:x:%d:%d:PostgreSQL:/var/lib/postgresql:/sbin/nologin\n", pgUID, pgUID)},
		{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\npostgres:x:%d:\n", pgUID)},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "var/run/postgresql/", mode: 0o775, dir: true, uid: pgUID, gid: pgUID},
		{path: "var/lib/postgresql/", mode: 0o755, dir: true, uid: pgUID, gid: pgUID},
		{path: "var/lib/postgresql/data/", mode: 0o700, dir: true, uid: pgUID, gid: pgUID},
		{path: "docker-entrypoint-initdb.d/", mode: 0o755, dir: true},
	}
	for _, e := range es {
		dirs[e.path] = true
	}
	add := func(dst, src string) error {
		data, err := os.ReadFile(src) // follows symlinks: the image holds the files
		if err != nil {
			return err
		}
		info, err := os.Stat(src)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(dst, "/")
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			if !dirs[d+"/"] {
				dirs[d+"/"] = true
				es = append(es, entry{path: d + "/", mode: 0o755, dir: true})
			}
		}
		es = append(es, entry{path: rel, mode: int64(info.Mode().Perm()), data: data})
		return nil
	}
	if err := add("/usr/local/bin/pgentry", entrypoint); err != nil {
		return nil, err
	}
	for f := range files {
		if err := add(f, f); err != nil {
			return nil, fmt.Errorf("adding %s: %w", f, err)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	env := []string{"PATH=" + pgDir + "/bin:/usr/local/bin", "PGDATA=/var/lib/postgresql/data", "TZ=UTC", "HOME=/var/lib/postgresql"}
	return imageOf(es, s.Created, s.Arch, "hack/image: PostgreSQL "+version+" from Debian's files", version,
		cfgOf(fmt.Sprintf("%d:%d", pgUID, pgUID), []string{"/usr/local/bin/pgentry"}, env))
}

func cfgOf(user string, entrypoint, env []string) v1.Config {
	return v1.Config{User: user, Entrypoint: entrypoint, WorkingDir: "/", Env: env}
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibraries is the closure of the shared objects elves load, as ldd
// resolves them on this machine (the dynamic loader included).
func sharedLibraries(elves []string) ([]string, error) {
	seen := map[string]bool{}
	for _, e := range elves {
		out, err := exec.Command("ldd", e).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", e, err)
		}
		for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
			seen[m[1]] = true
		}
	}
	var libs []string
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}
