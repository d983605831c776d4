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

package codes

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// coded is an error of another layer that knows its code, as the source
// client's errors do (their mapping is tested in internal/source).
type coded struct{ c Code }

func (e coded) Error() string    { return "coded " + string(e.c) }
func (e coded) StableCode() Code { return e.c }

// TestOf: a Refusal keeps its code over anything it wraps, a Coded error
// gives its own code wrapped or not, connection-class failures are
// DATABASE_UNAVAILABLE and anything else INTERNAL.
func TestOf(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"refusal", Newf(LeaseHeld, "held"), LeaseHeld},
		{"refusal wrapping a coded error", &Refusal{Code: CursorMoved, Err: coded{SourceRefused}}, CursorMoved},
		{"coded", coded{SourceVerification}, SourceVerification},
		{"wrapped coded", fmt.Errorf("fetch: %w", coded{SourceUnavailable}), SourceUnavailable},
		{"coded wins over the context it wraps", fmt.Errorf("%w: %w", coded{SourceRefused}, context.Canceled), SourceRefused},
		{"cancelled context", fmt.Errorf("page: %w", context.Canceled), DatabaseUnavailable},
		{"anything else", errors.New("boom"), Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err); got != tc.want {
				t.Fatalf("Of(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
