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

package controllers

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// tenantPW is the password of every DSN below: no refusal may quote it.
const tenantPW = "pw-t3nant-s3cr3t"

// TestParseTenantDSN (docs/security.md, "A tenant's DSN reads nothing of
// the manager's"): every key that makes the driver read a file, redirect
// the connection, tune the manager's pools or reach the server as a
// setting is refused, in both syntaxes, naming the key and never the
// password; so is a unix socket host. The files named do not exist: a read
// would fail with a file error, not with the refusal, so a refusal proves
// nothing was opened. What a network DSN needs parses, sslrootcert=system
// included.
func TestParseTenantDSN(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "does-not-exist")
	kv := "host=db.example port=5432 dbname=exchange user=app password=" + tenantPW + " "
	uri := "postgres://app:" + tenantPW + "@db.example:5432/exchange?"
	q := url.QueryEscape(missing)
	refused := []struct {
		name, dsn string
		keys      []string // each must be named
	}{
		{"passfile", kv + "passfile=/var/run/secrets/kubernetes.io/serviceaccount/token", []string{"passfile"}},
		{"passfile (URI)", uri + "passfile=" + q, []string{"passfile"}},
		{"sslkey", kv + "sslkey=" + missing, []string{"sslkey"}},
		{"sslkey (URI)", uri + "sslmode=require&sslkey=" + q, []string{"sslkey"}},
		{"sslcert", kv + "sslcert=" + missing, []string{"sslcert"}},
		{"sslcert and sslkey (URI)", uri + "sslcert=" + q + "&sslkey=" + q, []string{"sslcert", "sslkey"}},
		{"sslrootcert a path", kv + "sslmode=verify-full sslrootcert=" + missing, []string{"sslrootcert", "chart option"}},
		{"sslrootcert a path (URI)", uri + "sslrootcert=" + q, []string{"sslrootcert"}},
		{"sslrootcert a percent-encoded key (URI)", uri + "ssl%72ootcert=" + q, []string{"sslrootcert"}},
		{"sslrootcert system then a path", kv + "sslrootcert=system sslrootcert=" + missing, []string{"sslrootcert"}},
		{"sslrootcert system then a path (URI)", uri + "sslrootcert=system&sslrootcert=" + q, []string{"sslrootcert"}},
		{"sslrootcert system with an encoded tail (URI)", uri + "sslrootcert=system%26x", []string{"sslrootcert"}},
		{"sslrootcert quoted system with a tail", kv + "sslrootcert='system " + missing + "'", []string{"sslrootcert"}},
		{"sslrootcert after a closing quote", "host=db.example application_name='x'sslrootcert=" + missing, []string{"sslrootcert"}},
		{"sslrootcert hidden behind a password naming it", "host=db.example password='a sslrootcert=system' sslrootcert=" + missing, []string{"sslrootcert"}},
		{"sslpassword", kv + "sslpassword=x", []string{"sslpassword"}},
		{"service and servicefile", kv + "service=s servicefile=" + missing, []string{"service ", "servicefile"}},
		{"servicefile (URI)", uri + "service=s&servicefile=" + q, []string{"servicefile"}},
		{"hostaddr", kv + "hostaddr=10.0.0.1", []string{"hostaddr"}},
		{"options", kv + "options=-csearch_path=evil", []string{"options"}},
		{"a runtime parameter", kv + "search_path=evil", []string{"search_path"}},
		{"pool_max_conns (URI)", uri + "pool_max_conns=1000", []string{"pool_max_conns"}},
		{"statement cache and exec mode", kv + "statement_cache_capacity=0 default_query_exec_mode=simple_protocol", []string{"statement_cache_capacity", "default_query_exec_mode"}},
		{"krbsrvname", kv + "krbsrvname=postgres", []string{"krbsrvname"}},
		{"sslcertmode", kv + "sslcertmode=require", []string{"sslcertmode"}},
		{"ssl other than true (URI)", uri + "ssl=false", []string{"ssl"}},
		{"a key that is not a keyword", kv + "Pass%20Word=x", []string{"a key that is not a connection keyword"}},
		{"a socket directory", "host=/var/run/postgresql dbname=exchange user=app password=" + tenantPW, []string{"unix socket"}},
		{"a socket directory (URI host)", "postgres://app:" + tenantPW + "@%2Ftmp/exchange", []string{"unix socket"}},
		{"a socket directory (URI query)", "postgres://app:" + tenantPW + "@/exchange?host=/tmp", []string{"unix socket"}},
		{"a socket among hosts", "host=db.example,/tmp dbname=exchange user=app password=" + tenantPW, []string{"unix socket"}},
		{"an abstract socket", "host=@pg dbname=exchange user=app password=" + tenantPW, []string{"unix socket"}},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			_, err := parseTenantDSN(tc.dsn)
			if err == nil {
				t.Fatal("parsed, want a refusal")
			}
			msg := err.Error()
			if codes.Of(err) != codes.DatabaseUnavailable {
				t.Fatalf("code %s, want %s: %s", codes.Of(err), codes.DatabaseUnavailable, msg)
			}
			if !strings.Contains(msg, "does not accept") && !strings.Contains(msg, "does not connect to") {
				t.Fatalf("not the refusal (a file or parse error?): %s", msg)
			}
			for _, k := range tc.keys {
				if !strings.Contains(msg, k) {
					t.Fatalf("the refusal does not name %q: %s", k, msg)
				}
			}
			for _, secret := range []string{tenantPW, missing, dir} {
				if strings.Contains(msg, secret) {
					t.Fatalf("the refusal quotes the DSN (%q): %s", secret, msg)
				}
			}
		})
	}

	accepted := []string{
		"postgres://app:" + tenantPW + "@db.example:5432/exchange?sslmode=verify-full&sslsni=1&connect_timeout=5&application_name=pr&target_session_attrs=read-write",
		"postgresql://app:" + tenantPW + "@db.example/exchange?ssl=true",
		"postgres://app@db-a.example:5432,db-b.example:5433/exchange?target_session_attrs=primary",
		"postgres://app@[::1]:5432/exchange",
		"postgres://app@db.example/exchange?sslrootcert=system",
		"postgres://app@db.example/exchange?sslmode=verify-full&sslrootcert=system&application_name=x",
		"postgres://app@db.example/exchange?sslnegotiation=direct&sslmode=require&channel_binding=require&require_auth=scram-sha-256",
		kv + "sslmode=verify-full sslsni=1 connect_timeout=5 application_name=pr target_session_attrs=read-write",
		"host=db.example database=exchange user=app password='" + tenantPW + " with spaces'",
		kv + "sslrootcert=system",
		kv + "sslrootcert = 'system' sslmode=verify-full",
		"sslrootcert=system " + kv,
		kv + "sslnegotiation=direct sslmode=require channel_binding=require require_auth=scram-sha-256",
		"host=db-a.example,db-b.example port=5432,5433 dbname=exchange user=app",
	}
	for _, dsn := range accepted {
		t.Run("accepted/"+strings.ReplaceAll(dsn, tenantPW, "PW"), func(t *testing.T) {
			cfg, err := parseTenantDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host == "" || strings.HasPrefix(cfg.Host, "/") {
				t.Fatalf("host %q", cfg.Host)
			}
		})
	}
}

// TestParseTenantDSN_NoFileRead: the refusal comes before the driver opens
// anything. A service file that exists and would redirect the connection
// (and supply a password) is never read: the refusal names the keys, and
// the redaction, which parses the DSN for its password, does not learn the
// file's password either.
func TestParseTenantDSN_NoFileRead(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "pg_service.conf")
	const filePW = "pw-from-the-managers-file"
	if err := os.WriteFile(svc, []byte("[s]\nhost=db.example\npassword="+filePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := "service=s servicefile=" + svc + " dbname=exchange user=app"
	if _, err := parseTenantDSN(dsn); err == nil || !strings.Contains(err.Error(), "servicefile") {
		t.Fatalf("err %v, want a refusal naming servicefile", err)
	}
	if got := computeSecretsIn(resolvedSecrets{dsn: dsn}); slices.Contains(got, filePW) {
		t.Fatalf("the redaction parsed the DSN unchecked: it read the service file's password")
	}
	// The pool is never built either.
	c := &Connections{}
	defer c.Close()
	_, err := c.Store(context.Background(), "ns/one", dsn)
	if codes.Of(err) != codes.DatabaseUnavailable || !strings.Contains(err.Error(), "servicefile") {
		t.Fatalf("Store: %v, want the refusal", err)
	}
}
