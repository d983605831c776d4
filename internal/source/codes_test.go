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

package source

import (
	"context"
	"fmt"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/codes"
)

// TestCodesOf_SourceErrors: the source client's typed errors map to their stable
// code, wrapped or not, and a refused redirect is a SOURCE_REFUSED that
// needs review (BLOCKED): retrying would be redirected again, and following
// it is what the client refuses.
func TestCodesOf_SourceErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"refused redirect", &RefusalError{Status: 302, Code: CodeRedirectRefused}, codes.SourceRefused},
		{"wrapped refused redirect", fmt.Errorf("fetch: %w", &RefusalError{Status: 308, Code: CodeRedirectRefused}), codes.SourceRefused},
		{"after seq beyond boundary", &RefusalError{Status: 409, Code: CodeAfterSeqBeyondBoundary}, codes.SourceUnavailable},
		{"unavailable", &UnavailableError{Status: 503}, codes.SourceUnavailable},
		// Not DATABASE_UNAVAILABLE: the member did not answer.
		{"unavailable wrapping a cancelled context", &UnavailableError{Err: context.Canceled}, codes.SourceUnavailable},
		{"refused with another 409 code", &RefusalError{Status: 409, Code: CodeDiscontinuity}, codes.SourceRefused},
		{"verification", &VerificationError{Code: VerifyDigestMismatch}, codes.SourceVerification},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := codes.Of(tc.err); got != tc.want {
				t.Fatalf("Of(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
	if codes.SourceRefused.Transient() {
		t.Fatal("SOURCE_REFUSED is transient: a redirecting source would be retried forever instead of reviewed")
	}
}
