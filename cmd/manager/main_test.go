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
	"strings"
	"testing"
)

func TestParseFlags_DefaultsAndErrors(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.enableAutoRecovery {
		t.Fatal("auto-recovery must be off by default (NFR-APR01)")
	}
	if o.leaderElect {
		t.Fatal("leader election is not needed for safety and is off by default")
	}
	cases := map[string][]string{
		"max-concurrent-reconciles": {"--max-concurrent-reconciles=0"},
		"sync-period":               {"--sync-period=1s"},
		"watch-label-selector":      {"--watch-label-selector=a=b=c"},
	}
	for want, args := range cases {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseFlags(%v) = %v, want an error naming %s", args, err, want)
		}
	}
	if _, err := newLogger(options{logLevel: "loud"}); err == nil {
		t.Error("an unknown log level must be refused")
	}
}

func TestDefaultOwner_Unique(t *testing.T) {
	if a, b := defaultOwner(), defaultOwner(); a == b {
		t.Fatalf("two managers on one host got the same lease owner %q", a)
	}
}
