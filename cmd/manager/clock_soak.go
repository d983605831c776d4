//go:build soak

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
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// ClockEnv configures the skewed clock of a soak build (-tags soak only):
// "offset=<duration>,rate=<float>" reads as real start + offset +
// (real elapsed × rate). A manager built without the tag ignores it.
const ClockEnv = "PROJECTION_SOAK_CLOCK"

// skewedClock runs off the real clock by a fixed offset and at another rate,
// as a badly synchronised host's clock does.
type skewedClock struct {
	start  time.Time
	offset time.Duration
	rate   float64
}

func (c skewedClock) Now() time.Time {
	elapsed := time.Since(c.start)
	return c.start.Add(c.offset + time.Duration(float64(elapsed)*c.rate))
}

func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// managerClock returns the skewed clock the soak asked for, or the real one.
// A malformed setting exits: a soak that believes it skewed a clock it did
// not would prove nothing.
func managerClock() clock.PassiveClock {
	v := os.Getenv(ClockEnv)
	if v == "" {
		return clock.RealClock{}
	}
	c, err := parseSkew(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", ClockEnv, v, err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "soak build: skewed clock offset=%s rate=%g\n", c.offset, c.rate)
	return c
}

func parseSkew(v string) (skewedClock, error) {
	c := skewedClock{start: time.Now(), rate: 1}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("want key=value, got %q", kv)
		}
		var err error
		switch k {
		case "offset":
			c.offset, err = time.ParseDuration(val)
		case "rate":
			c.rate, err = strconv.ParseFloat(val, 64)
			if err == nil && (c.rate <= 0 || c.rate > 10) {
				err = fmt.Errorf("rate %g outside (0, 10]", c.rate)
			}
		default:
			err = fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}
