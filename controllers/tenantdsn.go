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
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// tenantDSNKeys is every key a DSN from a tenant's Secret may carry: what a
// network connection needs and nothing that makes pgx read the manager's
// files, tune its pools or set server parameters. Fails closed: a key a
// future pgx learns is refused until listed (docs/security.md, "A tenant's
// DSN reads nothing of the manager's", says why each key is in or out).
var tenantDSNKeys = []string{
	// Where: one or more host[:port] over TCP (a socket is refused below).
	"host", "port",
	// Who: the database and the role; the password is the whole point of
	// the Secret.
	"dbname", "user", "password",
	// Transport security, all read from the DSN alone: sslmode (and the
	// URI's ssl=true, which pgx accepts as sslmode's alias), SNI, direct TLS
	// negotiation; channel_binding and require_auth only narrow what the
	// client accepts from the server.
	"sslmode", "sslsni", "sslnegotiation", "channel_binding", "require_auth",
	// Behaviour of the connection that is the tenant's business: how long
	// to wait, which server of several, how it shows in pg_stat_activity.
	"connect_timeout", "target_session_attrs", "application_name",
}

// fileKeys are the keys that make the driver read a file, and what each
// reads, for the refusal's message.
var fileKeys = map[string]string{
	"passfile":    "a password file",
	"servicefile": "a service file",
	"service":     "a service file",
	"sslkey":      "a client key file",
	"sslcert":     "a client certificate file",
	"sslpassword": "the client key file's passphrase",
	"sslrootcert": "a CA file",
}

// rootCertHint follows a refused sslrootcert in the refusal.
const rootCertHint = "; only sslrootcert=system, the system CA pool, is accepted: a private CA needs a chart option that does not exist yet"

// parseTenantDSN parses a DSN read from a tenant's Secret, refusing it
// (DATABASE_UNAVAILABLE, as a DSN that does not parse) when it carries a key
// outside tenantDSNKeys or names a unix socket. It must run before any other
// parse of the DSN, the redaction's included: pgx reads the files a DSN
// names while parsing it, so a check after a parse would come after the
// read. The keys are checked by pgx itself (ConnStringAllowedKeys), which
// rejects them before any filesystem access. The refusal names the keys,
// never the DSN or a value (the password is in it).
func parseTenantDSN(dsn string) (*pgconn.Config, error) {
	allowed := tenantDSNKeys
	if rootCertIsSystem(dsn) {
		allowed = append(slices.Clip(allowed), "sslrootcert")
	}
	cfg, err := pgconn.ParseConfigWithOptions(dsn, pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowed})
	if err != nil {
		if keys := refusedKeys(dsn, allowed, err); len(keys) > 0 {
			return nil, codes.Newf(codes.DatabaseUnavailable, "the database DSN in the referenced Secret uses %s, which the manager does not accept from a Secret (allowed: %s)",
				strings.Join(keys, "; "), strings.Join(tenantDSNKeys, ", ")+", sslrootcert=system")
		}
		// pgx's parse errors can quote the DSN; never surface that text.
		return nil, codes.Newf(codes.DatabaseUnavailable, "the database DSN in the referenced Secret does not parse as a PostgreSQL connection string")
	}
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if network, _ := pgconn.NetworkAddress(h, 5432); network == "unix" || strings.HasPrefix(h, "@") {
			return nil, codes.Newf(codes.DatabaseUnavailable, "the database DSN in the referenced Secret names a unix socket as its host (a DSN without a host defaults to one when the pod has a socket directory), which the manager does not connect to from a Secret: name a host reachable over the network")
		}
	}
	return cfg, nil
}

// pgxRefusedKey is the key pgx names when ConnStringAllowedKeys refuses one.
var pgxRefusedKey = regexp.MustCompile(`connection string key "([^"]*)" is not in ConnStringAllowedKeys`)

// refusedKeys lists the keys of dsn outside allowed, each with what it
// would have done, for the refusal's message; nil when pgx's err is not an
// allow-list refusal. pgx names one refused key (the first it meets in a
// map); dsnKeys adds the others it finds. A name that is not a plain
// keyword is not quoted (it is text of the DSN, and could be anything).
func refusedKeys(dsn string, allowed []string, err error) []string {
	m := pgxRefusedKey.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	ok := map[string]bool{"database": true}
	for _, k := range allowed {
		ok[k] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range append([]string{m[1]}, dsnKeys(dsn)...) {
		if ok[k] || seen[k] {
			continue
		}
		seen[k] = true
		switch what, file := fileKeys[k]; {
		case file && k == "sslrootcert":
			out = append(out, k+" (reads "+what+" in the manager's pod"+rootCertHint+")")
		case file:
			out = append(out, k+" (reads "+what+" in the manager's pod)")
		case plainKeyword.MatchString(k):
			out = append(out, k)
		default:
			out = append(out, "a key that is not a connection keyword")
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var plainKeyword = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// dsnKeys is the keys of dsn, read as pgx reads them (keyword/value, or a
// URI's query), best effort: it only names keys in a refusal, and pgx
// alone decides what is refused.
func dsnKeys(dsn string) []string {
	var keys []string
	if isURIDSN(dsn) {
		_, query, _ := strings.Cut(dsn, "?")
		for _, pair := range strings.Split(query, "&") {
			k, _, _ := strings.Cut(pair, "=")
			if k = strings.TrimSpace(percentDecode(k)); k != "" {
				keys = append(keys, k)
			}
		}
		return keys
	}
	s := strings.TrimLeft(dsn, " \t\n\r\v\f")
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			break
		}
		if k := strings.Trim(s[:eq], " \t\n\r\v\f"); k != "" {
			if k == "dbname" {
				k = "database"
			}
			keys = append(keys, k)
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\v\f")
		quoted := strings.HasPrefix(s, "'")
		if quoted {
			s = s[1:]
		}
		end := 0
		for ; end < len(s); end++ {
			if s[end] == '\\' {
				end++
				continue
			}
			if quoted && s[end] == '\'' || !quoted && strings.IndexByte(" \t\n\r\v\f", s[end]) >= 0 {
				break
			}
		}
		s = strings.TrimLeft(s[min(end+1, len(s)):], " \t\n\r\v\f")
	}
	return keys
}

func isURIDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// What must follow each "sslrootcert" for rootCertIsSystem: in a URI a
// whole query pair, in keyword/value form a whole pair (the value bare or
// quoted) followed by whitespace or the end.
var (
	systemRootCertURI     = regexp.MustCompile(`^sslrootcert=system(&|$)`)
	systemRootCertKeyword = regexp.MustCompile(`^sslrootcert[ \t\n\r\f]*=[ \t\n\r\f]*(system|'system')([ \t\n\r\f]|$)`)
)

// rootCertIsSystem reports whether every sslrootcert in dsn is
// sslrootcert=system: the system CA pool, which pgx loads without reading a
// file the DSN names (and which makes sslmode verify-full). Only then may
// pgx's allow-list admit the key: pgx reads any other value as a path while
// parsing, and its reading of the value cannot be asked for before that
// read. So this decides on the text, conservatively: every occurrence of
// "sslrootcert" (also after one percent-decoding, as pgx decodes a URI's
// query keys) must start a literal pair whose value is system, so that
// wherever pgx finds the key its value is system. A password containing
// "sslrootcert" leaves the key refused, never admitted wrongly.
func rootCertIsSystem(dsn string) bool {
	re, before := systemRootCertKeyword, " \t\n\r\f"
	n := strings.Count(dsn, "sslrootcert")
	if isURIDSN(dsn) {
		re, before = systemRootCertURI, "?&"
		if strings.Count(percentDecode(dsn), "sslrootcert") != n {
			return false
		}
	}
	if n == 0 {
		return false
	}
	for i, rest := 0, dsn; ; {
		j := strings.Index(rest, "sslrootcert")
		if j < 0 {
			return true
		}
		at := i + j
		if at > 0 && strings.IndexByte(before, dsn[at-1]) < 0 || at == 0 && before == "?&" || !re.MatchString(dsn[at:]) {
			return false
		}
		i, rest = at+1, dsn[at+1:]
	}
}

// percentDecode decodes %XX sequences and leaves anything else as it is.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}
