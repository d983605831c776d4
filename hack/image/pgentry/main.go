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

// Command pgentry is the entrypoint of the e2e node's PostgreSQL image
// (hack/image --flavor postgres), built from Debian's PostgreSQL files. It
// honours the part of the official image's contract the chart's local
// profile uses: PGDATA, POSTGRES_PASSWORD, POSTGRES_DB and the *.sql files
// of /docker-entrypoint-initdb.d, run once on an empty data directory.
// Without it the profile's PostgreSQL pod starts a server with no password,
// no database and no projection tables.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

const (
	socketDir = "/var/run/postgresql"
	initDir   = "/docker-entrypoint-initdb.d"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgentry:", err)
		os.Exit(1)
	}
}

func run() error {
	pgdata := os.Getenv("PGDATA")
	if pgdata == "" {
		pgdata = "/var/lib/postgresql/data"
	}
	postgres, err := exec.LookPath("postgres")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); os.IsNotExist(err) {
		if err := initialise(pgdata); err != nil {
			return fmt.Errorf("initialising %s: %w", pgdata, err)
		}
	}
	args := append([]string{"postgres", "-D", pgdata, "-c", "listen_addresses=*", "-c", "unix_socket_directories=" + socketDir}, os.Args[1:]...)
	return syscall.Exec(postgres, args, os.Environ())
}

func initialise(pgdata string) error {
	password := os.Getenv("POSTGRES_PASSWORD")
	if password == "" {
		return fmt.Errorf("POSTGRES_PASSWORD is empty: the server would accept no password login")
	}
	if err := os.MkdirAll(pgdata, 0o700); err != nil {
		return err
	}
	pw, err := os.CreateTemp("", "pgpass")
	if err != nil {
		return err
	}
	defer os.Remove(pw.Name())
	if _, err := pw.WriteString(password + "\n"); err != nil {
		return err
	}
	if err := pw.Close(); err != nil {
		return err
	}
	if err := runCmd(nil, "initdb", "-D", pgdata, "-U", "postgres", "--pwfile="+pw.Name(),
		"--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		return err
	}
	hba, err := os.OpenFile(filepath.Join(pgdata, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := hba.WriteString("host all all all scram-sha-256\n"); err != nil {
		return err
	}
	if err := hba.Close(); err != nil {
		return err
	}
	// A server on the socket only while the init files run: nothing
	// reaches it over the network before they are done.
	srv := exec.Command("postgres", "-D", pgdata, "-c", "listen_addresses=", "-c", "unix_socket_directories="+socketDir)
	srv.Stdout, srv.Stderr = os.Stdout, os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for runCmd(nil, "pg_isready", "-q", "-h", socketDir, "-U", "postgres") != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the initialisation server did not become ready")
		}
		time.Sleep(200 * time.Millisecond)
	}
	db := os.Getenv("POSTGRES_DB")
	if db == "" {
		db = "postgres"
	}
	psql := []string{"psql", "-v", "ON_ERROR_STOP=1", "-X", "-q", "-h", socketDir, "-U", "postgres"}
	if db != "postgres" {
		// psql quotes the name (:"db"), so any name is one identifier.
		create := []byte(`CREATE DATABASE :"db";` + "\n")
		if err := runCmd(create, append(psql, "-d", "postgres", "-v", "db="+db)...); err != nil {
			return err
		}
	}
	files, err := filepath.Glob(filepath.Join(initDir, "*.sql"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "pgentry: running", f)
		if err := runCmd(nil, append(psql, "-d", db, "-f", f)...); err != nil {
			return err
		}
	}
	// SIGINT is PostgreSQL's fast shutdown.
	if err := srv.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	stopped = true
	return srv.Wait()
}

func runCmd(stdin []byte, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv[:1], " "), err, out.String())
	}
	os.Stderr.Write(out.Bytes())
	return nil
}
