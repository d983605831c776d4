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

package reconstore

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// TestTelemetry_FailedDryRunWithoutResult: a dry run that failed before it
// had a result (the repair database down) is recorded, not a nil
// dereference through the embedded result (a panic there hid the failure
// from status: controller-runtime recovered and retried, RunFailed never
// written).
func TestTelemetry_FailedDryRunWithoutResult(t *testing.T) {
	tel, err := NewTelemetry(logr.Discard(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*DryRun{nil, {}} {
		tel.DryRun("venue-a", d, errors.New("connection refused"), 0)
	}
}
