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
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// shiftedClock is the real clock plus an offset a test sets (plan expiry,
// a schedule falling due). Its timers are real: as the reconciliation
// controller's QueueClock, a requeue whose time the offset has passed is
// taken at the work queue's next check (at most 10 s), without waiting out
// the real delay.
type shiftedClock struct {
	clock.RealClock
	offset atomic.Int64
}

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) shift(d time.Duration)           { c.offset.Store(int64(d)) }
