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

package v1alpha1

import "time"

// Defaults mirror the +kubebuilder:default markers. The API server applies
// the markers; these accessors exist so that code never reads a nil pointer
// from an object built without the server (unit tests, older stored objects).
const (
	DefaultPageSize       int32 = 1000
	DefaultPagesPerCycle  int32 = 20
	DefaultCycleTimeout         = 20 * time.Second
	DefaultInterval             = 30 * time.Second
	DefaultBackoffBase          = time.Second
	DefaultBackoffCap           = 5 * time.Minute
	DefaultLeaseDuration        = 30 * time.Second
	DefaultRequestTimeout       = 30 * time.Second
)

// EffectivePageSize returns spec.pageSize or its default.
func (s *ProjectionRecoverySpec) EffectivePageSize() int {
	if s.PageSize > 0 {
		return int(s.PageSize)
	}
	return int(DefaultPageSize)
}

// EffectivePagesPerCycle returns spec.pagesPerCycle or its default.
func (s *ProjectionRecoverySpec) EffectivePagesPerCycle() int {
	if s.PagesPerCycle > 0 {
		return int(s.PagesPerCycle)
	}
	return int(DefaultPagesPerCycle)
}

// EffectiveCycleTimeout returns spec.cycleTimeout or its default.
func (s *ProjectionRecoverySpec) EffectiveCycleTimeout() time.Duration {
	if s.CycleTimeout != nil && s.CycleTimeout.Duration > 0 {
		return s.CycleTimeout.Duration
	}
	return DefaultCycleTimeout
}

// EffectiveInterval returns spec.interval or its default.
func (s *ProjectionRecoverySpec) EffectiveInterval() time.Duration {
	if s.Interval != nil && s.Interval.Duration > 0 {
		return s.Interval.Duration
	}
	return DefaultInterval
}

// EffectiveBackoff returns spec.backoff's base and cap or their defaults.
func (s *ProjectionRecoverySpec) EffectiveBackoff() (base, maxDelay time.Duration) {
	base, maxDelay = DefaultBackoffBase, DefaultBackoffCap
	if s.Backoff != nil {
		if s.Backoff.Base.Duration > 0 {
			base = s.Backoff.Base.Duration
		}
		if s.Backoff.Cap.Duration > 0 {
			maxDelay = s.Backoff.Cap.Duration
		}
	}
	return base, maxDelay
}

// EffectiveLeaseDuration returns spec.leaseDuration or its default.
func (s *ProjectionRecoverySpec) EffectiveLeaseDuration() time.Duration {
	if s.LeaseDuration != nil && s.LeaseDuration.Duration > 0 {
		return s.LeaseDuration.Duration
	}
	return DefaultLeaseDuration
}

// EffectiveRequestTimeout returns source.requestTimeout or its default.
func (s *SourceSpec) EffectiveRequestTimeout() time.Duration {
	if s.RequestTimeout != nil && s.RequestTimeout.Duration > 0 {
		return s.RequestTimeout.Duration
	}
	return DefaultRequestTimeout
}
