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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/store"
)

// EnvDSN names the environment variable `manager migrate` reads the DSN from
// when --dsn-file is not given.
const EnvDSN = "PROJECTION_DSN"

const migrateUsage = `Usage: manager migrate [--dsn-file PATH] [--status] [--timeout DURATION]

Applies projection-recovery's missing schema migrations (recovery's own tables
only, additive and rerunnable; never a downgrade) and prints each version
applied. With --status, prints the schema version and changes nothing.

The DSN is read from --dsn-file or, without it, from $` + EnvDSN + `; it is never
printed. Connect as projection_recovery_migrator or the schema owner: this is
the step that applies recovery's schema (the chart runs it as a hook Job,
migrate.enabled), the runtime roles only get grants. Run the grants each
migration needs after it (docs/database-role.md).

Flags:
`

// migrateOptions are the flags of `manager migrate`.
type migrateOptions struct {
	dsnFile string
	status  bool
	timeout time.Duration
}

// newMigrateFlagSet binds the flags of `manager migrate` to o; its usage
// prints migrateUsage and the flags to the set's output.
func newMigrateFlagSet(o *migrateOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("manager migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), migrateUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.dsnFile, "dsn-file", "", "File holding the database DSN (e.g. a mounted Secret). Without it, $"+EnvDSN+" is used.")
	fs.BoolVar(&o.status, "status", false, "Print the schema version and what this binary requires; change nothing.")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "Give up after this long, waiting for another migrator included.")
	return fs
}

// migrateMain is main's entry for `manager migrate`: it cancels on SIGINT or
// SIGTERM (the migration in flight rolls back; applied ones stay).
func migrateMain(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMigrate(ctx, args, os.Getenv, os.Stdout, os.Stderr)
}

// runMigrate implements `manager migrate` for a DBA or a Job.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o migrateOptions
	fs := newMigrateFlagSet(&o)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // usage printed: asking for help is not a failure
		}
		return fmt.Errorf("migrate: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected arguments %q", fs.Args())
	}
	dsn, err := readDSN(o.dsnFile, getenv)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	st, err := store.Open(ctx, dsn)
	if err != nil {
		return fmt.Errorf("migrate: connecting to the database: %w", redactDSN(err, dsn))
	}
	defer st.Close()

	if o.status {
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrate: reading the schema version: %w", redactDSN(err, dsn))
		}
		fmt.Fprintf(stdout, "schema version: %d\nrequired by this binary: %d\nstate: %s\n", v.Current, v.Required, describe(v))
		return nil
	}
	applied, err := st.ApplyMigrations(ctx)
	for _, a := range applied {
		fmt.Fprintf(stdout, "applied version %d: %s (%s)\n", a.Version, a.Name, a.Duration.Round(time.Millisecond))
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", redactDSN(err, dsn))
	}
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: reading the schema version: %w", redactDSN(err, dsn))
	}
	if len(applied) == 0 {
		fmt.Fprint(stdout, "nothing to apply\n")
	}
	fmt.Fprintf(stdout, "schema version %d (this binary requires %d): %s\n", v.Current, v.Required, describe(v))
	return nil
}

// describe is the state of a schema version in a DBA's words.
func describe(v store.SchemaVersion) string {
	switch {
	case v.Missing():
		return fmt.Sprintf("migrations pending %v: run `manager migrate`", v.Pending)
	case v.Newer():
		return "newer than this binary (applied by a newer release; never downgraded, this binary runs on it)"
	default:
		return "current"
	}
}

// readDSN reads the DSN from path or, without one, from $PROJECTION_DSN. A
// flag carrying the DSN itself would show it in the process list, so there
// is none.
func readDSN(path string, getenv func(string) string) (string, error) {
	if path == "" {
		if dsn := strings.TrimSpace(getenv(EnvDSN)); dsn != "" {
			return dsn, nil
		}
		return "", fmt.Errorf("no DSN: give --dsn-file PATH or set $%s", EnvDSN)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading --dsn-file: %w", err)
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", fmt.Errorf("--dsn-file %s is empty", path)
	}
	return dsn, nil
}

// redactDSN keeps the DSN and its password out of an error's text. pgx
// already masks passwords in its messages; this holds for any other text
// (a driver or server message quoting the DSN) as well. The DSN is the
// platform administrator's, read in their own Job: unlike a tenant's
// (controllers' parseTenantDSN), it may name files (a mounted CA, a
// passfile), so it is parsed unrestricted.
func redactDSN(err error, dsn string) error {
	msg := err.Error()
	secrets := []string{dsn}
	if cfg, perr := pgconn.ParseConfig(dsn); perr == nil && cfg.Password != "" {
		secrets = append(secrets, cfg.Password)
	}
	redacted := msg
	for _, s := range secrets {
		redacted = strings.ReplaceAll(redacted, s, "xxxxx")
	}
	if redacted == msg {
		return err // nothing to hide: keep the chain for errors.Is/As
	}
	return errors.New(redacted)
}
