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

package recon

import (
	"container/heap"
	"sort"
)

// listed is the findings a report lists: every one while there are at most
// max, then the first max in report order (invariant table order, record
// key, then emission order, which is the order a stable sort by the first
// two keeps). It holds at most max findings whatever the scope emits, and
// counts every one by invariant, so the report can say how many it left
// out and of which kind. Keeping the first in emission order instead would
// list whatever the checks happened to reach first, not the report's head.
type listed struct {
	max         int
	total       int
	byInvariant map[InvariantID]int
	es          listedHeap // a max-heap once full: es[0] is the last listed
}

type listedFinding struct {
	f       Finding
	absence bool // the conclusion rests on an absence from the source (detector.finalCause)
	inv     int
	key     string
	n       int // emission order
}

func (a *listedFinding) before(b *listedFinding) bool {
	switch {
	case a.inv != b.inv:
		return a.inv < b.inv
	case a.key != b.key:
		return a.key < b.key
	}
	return a.n < b.n
}

func (l *listed) add(f Finding, absence bool) {
	if l.byInvariant == nil {
		l.byInvariant = map[InvariantID]int{}
	}
	l.total++
	l.byInvariant[f.Invariant]++
	e := listedFinding{f: f, absence: absence, inv: invariantOrder[f.Invariant], key: f.Record.Key(), n: l.total}
	switch {
	case len(l.es) < l.max:
		l.es = append(l.es, e)
		if len(l.es) == l.max {
			heap.Init(&l.es)
		}
	case l.max > 0 && e.before(&l.es[0]):
		l.es[0] = e
		heap.Fix(&l.es, 0)
	}
}

// sorted returns the listed findings in report order.
func (l *listed) sorted() []Finding {
	sort.Slice(l.es, func(i, j int) bool { return l.es[i].before(&l.es[j]) })
	out := make([]Finding, len(l.es))
	for i := range l.es {
		out[i] = l.es[i].f
	}
	return out
}

// listedHeap orders the listed findings latest first (container/heap).
type listedHeap []listedFinding

func (h listedHeap) Len() int           { return len(h) }
func (h listedHeap) Less(i, j int) bool { return h[j].before(&h[i]) }
func (h listedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *listedHeap) Push(x any)        { *h = append(*h, x.(listedFinding)) }
func (h *listedHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
