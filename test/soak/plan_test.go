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
package soak

import (
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func TestNewPlan(t *testing.T) {
	o := Options{Schedules: 10, Managers: 2, Window: 8 * time.Second, Lease: 5 * time.Second}
	t.Run("the same seed gives the same plan and skews", func(t *testing.T) {
		a, b := NewPlan(42, o), NewPlan(42, o)
		if !reflect.DeepEqual(a.Schedules, b.Schedules) || !reflect.DeepEqual(a.Steps, b.Steps) {
			t.Fatal("two plans of one seed differ")
		}
		for i := 0; i < 5; i++ {
			if x, y := a.Skew(), b.Skew(); x != y {
				t.Fatalf("skew %d: %s vs %s", i, x, y)
			}
		}
		if c := NewPlan(43, o); reflect.DeepEqual(a.Steps, c.Steps) {
			t.Fatal("seeds 42 and 43 drew the same steps")
		}
	})
	for seed := uint64(1); seed <= 200; seed++ {
		p := NewPlan(seed, o)
		kinds := map[FaultKind]int{}
		for i, s := range p.Steps {
			kinds[s.Kind]++
			if i > 0 && s.At < p.Steps[i-1].At {
				t.Fatalf("seed %d: steps out of order", seed)
			}
			if s.At < 0 || s.At >= o.Window {
				t.Fatalf("seed %d: %v starts outside the window", seed, s)
			}
			if s.Kind == FreezeManager && s.For <= o.Lease {
				t.Fatalf("seed %d: %v does not outlive the lease", seed, s)
			}
			switch s.Kind {
			case KillManager, FreezeManager:
				if s.Target < 0 || s.Target >= o.Managers {
					t.Fatalf("seed %d: %v targets no manager", seed, s)
				}
			case RestartMember, MemberFault:
				if s.Target < 0 || s.Target >= o.Schedules {
					t.Fatalf("seed %d: %v targets no schedule", seed, s)
				}
			}
		}
		for _, k := range globalKinds {
			if kinds[k] == 0 {
				t.Fatalf("seed %d: no %s in %v", seed, k, p.Steps)
			}
		}
		for _, s := range p.Schedules {
			if s.PageSize < 100 || s.Commands < 200 || s.DropRate <= 0 || s.DropRate >= 1 {
				t.Fatalf("seed %d: schedule %+v out of range", seed, s)
			}
		}
	}
	t.Run("skews stay within ±10m and rate [0.8, 1.25]", func(t *testing.T) {
		p := NewPlan(7, o)
		re := regexp.MustCompile(`^offset=(-?[0-9hms.]+),rate=([0-9.]+)$`)
		for i := 0; i < 100; i++ {
			m := re.FindStringSubmatch(p.Skew())
			if m == nil {
				t.Fatal("malformed skew")
			}
			off, err := time.ParseDuration(m[1])
			rate, _ := strconv.ParseFloat(m[2], 64)
			if err != nil || off < -10*time.Minute || off > 10*time.Minute || rate < 0.8 || rate > 1.25 {
				t.Fatalf("skew %s out of range", m[0])
			}
		}
	})
}
