//go:build !soak

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

import "k8s.io/utils/clock"

// managerClock is the clock of every age, renewal and expiry decision the
// controllers make. A released manager runs on the real clock; the fault soak
// (test/soak) builds the manager with -tags soak, which skews it
// (clock_soak.go), to show that no lease decision depends on a manager's own
// clock (FR-APR08: lease times are the database's clock_timestamp()).
func managerClock() clock.PassiveClock { return clock.RealClock{} }
