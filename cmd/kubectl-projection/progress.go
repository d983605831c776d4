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
	"fmt"
	"math"
	"strings"

	"github.com/projection-recovery/projection-recovery/internal/progress"
)

// progressBar renders verified/boundary as a bar of width cells and a
// percentage rounded down (100% only when the cursor is at the boundary).
func progressBar(verified, boundary int64, width int) string {
	frac := 0.0
	if boundary > 0 {
		frac = float64(verified) / float64(boundary)
	}
	frac = math.Max(0, math.Min(1, frac))
	filled := int(math.Floor(frac * float64(width)))
	pct := int(math.Floor(frac * 100))
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pct)
}

// formatRate renders verified events per second (internal/progress: the
// unit of status.progress.eventsPerSecond).
func formatRate(e progress.Estimate) string {
	switch {
	case !e.RateKnown:
		return "rate ?"
	case e.EventsPerSecond < 10:
		return fmt.Sprintf("%.1f ev/s", e.EventsPerSecond)
	default:
		return fmt.Sprintf("%.0f ev/s", e.EventsPerSecond)
	}
}

// formatETA renders the ETA; "never at this rate" when the cursor does not
// gain on the boundary although the rate is known, "?" while it is unknown.
func formatETA(e progress.Estimate) string {
	switch e.ETAState {
	case progress.ETAKnown:
		return "ETA " + e.ETA.String()
	case progress.ETANever:
		return "ETA never at this rate"
	default:
		return "ETA ?"
	}
}
