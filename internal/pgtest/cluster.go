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

package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
)

// Cluster is a throwaway PostgreSQL cluster started by this process, the Go
// twin of hack/postgres.sh.
type Cluster struct {
	Dir    string // temp dir: data/, socket, logs
	DSN    string // maintenance database DSN on 127.0.0.1
	bindir string
	asRoot bool
	guard  *exec.Cmd

	settings []string // extra -c name=value, after the defaults
}

// BinDir finds the newest installed server binaries (Debian layout).
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/initdb")
}

func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// StartCluster installs the server when it is missing (root only, apt-get),
// initdb's a cluster in a temp dir and starts it on a free loopback port. A
// watchdog process stops and removes the cluster if this process dies without
// calling Stop (a panicking test binary must not leak servers on a shared box).
//
// Durability is off (fsync, synchronous_commit, full_page_writes): nothing
// here survives the machine. settings ("name=value") are passed as -c after
// those defaults and override them: a cluster that is crashed on purpose
// needs synchronous_commit=on, or a commit acknowledged just before the crash
// is lost with the WAL still in shared memory.
func StartCluster(settings ...string) (*Cluster, error) {
	bindir, err := BinDir()
	if err != nil {
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("%w (and not root, so cannot apt-get install postgresql)", err)
		}
		for _, args := range [][]string{{"update"}, {"install", "-y", "postgresql"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("apt-get %v: %w\n%s", args, err, out)
			}
		}
		if bindir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "projection-pg.")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c := &Cluster{Dir: dir, bindir: bindir, asRoot: os.Geteuid() == 0, settings: settings}
	if err := c.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(c.bindir, name)
	if c.asRoot {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

func (c *Cluster) start() error {
	data := filepath.Join(c.Dir, "data")
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		return fmt.Errorf("mkdir data: %w", err)
	}
	if c.asRoot {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{c.Dir, data} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	if out, err := c.command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", port, c.Dir)
		for _, kv := range c.settings {
			opts += " -c " + kv
		}
		cmd := c.command("pg_ctl", "-D", data, "-l", filepath.Join(c.Dir, "server.log"), "-w", "-t", "30", "-o", opts, "start")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			log, _ := os.ReadFile(filepath.Join(c.Dir, "server.log"))
			lastErr = fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out.String(), log)
			continue
		}
		c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		c.startGuard()
		return nil
	}
	return lastErr
}

// startGuard launches `sh` that waits for this process to exit, then stops the
// server and removes the directory. Stop kills the guard first.
func (c *Cluster) startGuard() {
	stop := c.command("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "stop").Args
	script := `while kill -0 "$0" 2>/dev/null; do sleep 1; done; "$@" >/dev/null 2>&1; rm -rf "` + c.Dir + `"`
	g := exec.Command("sh", append([]string{"-c", script, strconv.Itoa(os.Getpid())}, stop...)...)
	if err := g.Start(); err == nil {
		c.guard = g
	}
}

// Restart stops the server in immediate mode (no shutdown checkpoint, every
// backend killed: what a crash looks like to its clients) and starts it again
// on the same port with the same options, recovering from its WAL.
func (c *Cluster) Restart() error {
	data := filepath.Join(c.Dir, "data")
	cmd := c.command("pg_ctl", "-D", data, "-l", filepath.Join(c.Dir, "server.log"), "-m", "immediate", "-w", "-t", "60", "restart")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, out)
	}
	return nil
}

// Stop stops the server and removes its directory.
func (c *Cluster) Stop() {
	if c.guard != nil && c.guard.Process != nil {
		_ = c.guard.Process.Kill()
		_ = c.guard.Wait()
	}
	cmd := c.command("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop")
	_ = cmd.Run()
	_ = os.RemoveAll(c.Dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	// A collision with another process between Close and the server binding the
	// port is retried by start.
	port := l.Addr().(*net.TCPAddr).Port
	return port, nil
}
