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
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/pgtest"
	"github.com/projection-recovery/projection-recovery/internal/store"
)

func TestMain(m *testing.M) { pgtest.MainLeakChecked(m) }

// secret is a password the tests put in DSNs; the server trusts loopback and
// ignores it, so it must only never appear in any output.
const secret = "s3cr3t-pw-42"

func withPassword(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret)
	return u.String()
}

func migrate(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runMigrate(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	all := out.String() + errOut.String()
	if err != nil {
		all += err.Error()
	}
	if strings.Contains(all, secret) {
		t.Fatalf("the DSN's password was printed:\n%s", all)
	}
	return out.String(), err
}

// A DBA's session: status on a fresh database, migrate, migrate again,
// status; through --dsn-file and through $PROJECTION_DSN.
func TestMigrateCommand_AppliesOnceAndReports(t *testing.T) {
	dsn := withPassword(t, pgtest.NewDSN(t))
	file := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	byFile := []string{"--dsn-file", file}
	env := map[string]string{EnvDSN: dsn}
	// Every migration this binary carries, as the command prints them.
	known := store.KnownMigrations()
	latest := strconv.FormatInt(known[len(known)-1], 10)
	var pendingList []string
	for _, v := range known {
		pendingList = append(pendingList, strconv.FormatInt(v, 10))
	}
	pending := strings.Join(pendingList, " ")
	steps := []struct {
		name string
		env  map[string]string
		args []string
		want []string // regexps the output must match, in order
	}{
		{"status before", nil, append([]string{"--status"}, byFile...), []string{`(?m)^schema version: 0$`, `(?m)^required by this binary: ` + latest + `$`, "pending \\[" + pending + "\\]: run `manager migrate`"}},
		{"migrate", nil, byFile, []string{`(?m)^applied version 1: 00001_ri06-automatic-recovery\.sql \(`, `(?m)^schema version ` + latest + ` \(this binary requires ` + latest + `\): current$`}},
		{"migrate again", env, nil, []string{`(?m)^nothing to apply$`, `(?m)^schema version ` + latest + ` \(this binary requires ` + latest + `\): current$`}},
		{"status after", env, []string{"--status"}, []string{`(?m)^schema version: ` + latest + `$`, `(?m)^state: current$`}},
	}
	for _, s := range steps {
		out, err := migrate(t, s.env, s.args...)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, w := range s.want {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%s: output does not match %s:\n%s", s.name, w, out)
			}
		}
		if s.name != "migrate" && strings.Contains(out, "applied version") {
			t.Errorf("%s applied something:\n%s", s.name, out)
		}
	}
}

// Failures name what is wrong without the DSN or its password.
func TestMigrateCommand_ErrorsNeverPrintTheDSN(t *testing.T) {
	admin := pgtest.AdminDSN(t)
	missing, err := pgtest.WithDatabase(admin, "no_such_database")
	if err != nil {
		t.Fatal(err)
	}
	missingDB := withPassword(t, missing)
	cases := []struct {
		name string
		dsn  string
		want string
	}{
		{"unknown database", missingDB, `database "no_such_database" does not exist`},
		{"unparsable", "postgres://postgres:" + secret + "@127.0.0.1:notaport/x", "connecting to the database"},
		{"keyword form, refused port", "host=127.0.0.1 port=1 user=postgres password=" + secret + " dbname=x connect_timeout=5", "connecting to the database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := migrate(t, map[string]string{EnvDSN: c.dsn})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
	if _, err := migrate(t, nil); err == nil || !strings.Contains(err.Error(), "--dsn-file PATH or set $"+EnvDSN) {
		t.Fatalf("no DSN: %v", err)
	}
	if _, err := migrate(t, nil, "--dsn-file", filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "reading --dsn-file") {
		t.Fatalf("absent file: %v", err)
	}
	if _, err := migrate(t, map[string]string{EnvDSN: admin}, "extra"); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Fatalf("extra argument: %v", err)
	}
}

// `manager migrate` is dispatched before the manager's own flags are parsed.
func TestRun_DispatchesMigrate(t *testing.T) {
	t.Setenv(EnvDSN, "")
	err := run([]string{"migrate"})
	if err == nil || !strings.Contains(err.Error(), "migrate: no DSN") {
		t.Fatalf("run(migrate) = %v, want the migrate command's answer", err)
	}
}
