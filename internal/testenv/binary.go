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

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// BinDirEnv names the folder of binaries `make test` built from this tree
// moments before (make build). A test that runs cmd/<name> takes it from
// there instead of linking it again; set only by hack/make-test.sh, which
// builds them in the same run, so they are never older than the tree.
const BinDirEnv = "PROJECTION_BIN_DIR"

var builds sync.Map // name → *binaryBuild

type binaryBuild struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of cmd/<name> built from this tree, once per
// process: from $PROJECTION_BIN_DIR when it holds it, else built with the
// flags `make` uses for everything that is not -race (CGO_ENABLED=0,
// -trimpath), so the build reuses the packages vet and the tests already
// compiled. A test binary running under -race (which runs with cgo on)
// would otherwise compile every dependency once more in a fourth variant.
func Binary(name string) (string, error) {
	v, _ := builds.LoadOrStore(name, &binaryBuild{})
	b := v.(*binaryBuild)
	b.once.Do(func() { b.path, b.err = build(name) })
	return b.path, b.err
}

func build(name string) (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built under a name of this process, then renamed: test binaries of
	// several packages build at once, and none may run another's half-written file.
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", name, os.Getpid()))
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
	}
	p := filepath.Join(dir, name)
	if err := os.Rename(tmp, p); err != nil {
		return "", err
	}
	return p, nil
}
