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
	"hash/maphash"
	"slices"
	"sort"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// orderIndex is the orders table's current version per order id, held for
// the whole detection (the order checks need it per order id: a version
// the source verifies after the row's is a rewound row, whenever it comes).
// 16 bytes an order: a keyed 64-bit hash of the id and the version, sorted.
// Two ids of one hash would share a slot (about 1 in 10^7 at 1.5M orders
// with a fresh key per detection, never chosen by the data): the slot is
// then marked ambiguous and its orders are read back by id (version
// reports no version for them, so they are checked from their rows).
type orderIndex struct {
	seed     maphash.Seed
	seeded   bool
	hashes   []uint64
	versions []int64
	built    bool
	// starts[b] is the first slot whose hash's top 16 bits are >= b: a
	// lookup searches only its bucket (a few dozen adjacent slots at 1.5M
	// orders) instead of the whole index (21 cache misses, a third of
	// detection's time on order events).
	starts []uint32
}

const ambiguousVersion = -1 << 63

func (x *orderIndex) hash(id string) uint64 {
	if !x.seeded {
		x.seed, x.seeded = maphash.MakeSeed(), true
	}
	return maphash.String(x.seed, id)
}

func (x *orderIndex) add(id string, version int64) {
	x.hashes = append(x.hashes, x.hash(id))
	x.versions = append(x.versions, version)
}

// reserve sizes the index for n orders (the orders table's count): the
// index is allocated once at its final size, never grown by doubling.
func (x *orderIndex) reserve(n int64) {
	if n > 0 && x.hashes == nil {
		x.hashes, x.versions = make([]uint64, 0, n), make([]int64, 0, n)
	}
}

// build sorts the index in place and marks slots whose hash repeats: no
// second copy, so the index peaks at its own 16 bytes an order.
func (x *orderIndex) build() {
	sort.Sort((*byHash)(x))
	n := 0
	for i := range x.hashes {
		if n > 0 && x.hashes[n-1] == x.hashes[i] {
			x.versions[n-1] = ambiguousVersion
			continue
		}
		x.hashes[n], x.versions[n] = x.hashes[i], x.versions[i]
		n++
	}
	x.hashes, x.versions, x.built = x.hashes[:n], x.versions[:n], true
	x.starts = make([]uint32, 1<<16+1)
	i := 0
	for b := range x.starts {
		for i < n && x.hashes[i]>>48 < uint64(b) {
			i++
		}
		x.starts[b] = uint32(i)
	}
}

// byHash sorts the index's two slices together by hash.
type byHash orderIndex

func (b *byHash) Len() int           { return len(b.hashes) }
func (b *byHash) Less(i, j int) bool { return b.hashes[i] < b.hashes[j] }
func (b *byHash) Swap(i, j int) {
	b.hashes[i], b.hashes[j] = b.hashes[j], b.hashes[i]
	b.versions[i], b.versions[j] = b.versions[j], b.versions[i]
}

// version is the current version of the order, false when the orders table
// has no row for it; ambiguous is true when the slot is shared.
func (x *orderIndex) version(id string) (v int64, ok, ambiguous bool) {
	if len(x.hashes) == 0 {
		return 0, false, false
	}
	h := x.hash(id)
	lo, hi := int(x.starts[h>>48]), int(x.starts[h>>48+1])
	j, found := slices.BinarySearch(x.hashes[lo:hi], h)
	if !found {
		return 0, false, false
	}
	i := lo + j
	if x.versions[i] == ambiguousVersion {
		return 0, true, true
	}
	return x.versions[i], true, false
}

// pairOrders finds each source order version's order_events row and, when
// it is the version of the order's current row, that row.
func (e *engine) pairOrders(p *SourcePage, pageE map[orderKey]*OrderRow, pageC map[string]*OrderRow) ([]*OrderRow, []*OrderRow, []curVersion, error) {
	pairE := make([]*OrderRow, len(p.Orders))
	pairC := make([]*OrderRow, len(p.Orders))
	curs := make([]curVersion, len(p.Orders))
	var lookIDs []string
	var lookVersions []int64
	lookE := map[orderKey]int{}
	var lookC []string
	lookCAt := map[string]int{}
	for i := range p.Orders {
		o := &p.Orders[i]
		k := orderKey{o.OrderID, o.Version}
		if r := e.pendE[k]; r != nil {
			pairE[i] = r
			delete(e.pendE, k)
		} else if r := pageE[k]; r != nil {
			pairE[i] = r
			delete(pageE, k)
		} else if _, dup := lookE[k]; !dup {
			lookE[k] = i
			lookIDs, lookVersions = append(lookIDs, o.OrderID), append(lookVersions, o.Version)
		}
		cv, has, ambiguous := e.cur.version(o.OrderID)
		curs[i] = curVersion{cv, has, ambiguous}
		if !has || (!ambiguous && cv != o.Version) {
			continue
		}
		if r := e.pendC[o.OrderID]; r != nil && r.Version == o.Version {
			pairC[i] = r
			delete(e.pendC, o.OrderID)
		} else if r := pageC[o.OrderID]; r != nil && r.Version == o.Version {
			pairC[i] = r
			delete(pageC, o.OrderID)
		} else if _, dup := lookCAt[o.OrderID]; !dup {
			lookC, lookCAt[o.OrderID] = append(lookC, o.OrderID), i
		}
	}
	if len(lookIDs) > 0 {
		ahead, err := e.h.OrderEventsByKey(e.ctx, lookIDs, lookVersions)
		if err != nil {
			return nil, nil, nil, e.histErr("order versions by key", err)
		}
		for j := range ahead {
			r := &ahead[j]
			k := orderKey{r.OrderID, r.Version}
			if i, ok := lookE[k]; ok && int64(r.Seq) > p.Through && pairE[i] == nil && !e.aheadE[k] {
				pairE[i] = r
				e.aheadE[k] = true
			}
		}
	}
	if len(lookC) > 0 {
		ahead, err := e.h.OrdersByID(e.ctx, lookC)
		if err != nil {
			return nil, nil, nil, e.histErr("orders by id", err)
		}
		for j := range ahead {
			r := &ahead[j]
			if i, ok := lookCAt[r.OrderID]; ok && int64(r.Seq) > p.Through && pairC[i] == nil && !e.aheadC[r.OrderID] &&
				r.Version == p.Orders[i].Version {
				pairC[i] = r
				e.aheadC[r.OrderID] = true
			}
		}
	}
	return pairE, pairC, curs, nil
}

// curVersion is the order index's answer for one source order event.
type curVersion struct {
	v              int64
	has, ambiguous bool
}

// order checks one source order version with its order_events row (r) and,
// when it is the current row's version, the current row (c).
func (e *engine) order(o *wire.Order, r, c *OrderRow, cur curVersion) {
	d := e.d
	d.cur = checkOrdersDecl
	e.countEvent(o.Seq)
	if o.Seq > d.b {
		return
	}
	retained := r != nil
	if retained {
		d.compareOrder(TableOrderEvents, r, o, nil)
	}
	if o.Seq <= d.v && !retained {
		d.emit(OrderSourceRetained, orderEventRecord(o.OrderID, o.Version), nil, srcOrderFields(o),
			RootCause{Code: CauseRowDeleted, Confidence: Likely,
				Hint:     "the cursor claims completeness through its verified seq, yet this verified order version is gone: deleted after verification",
				Evidence: []string{"seq=" + itoa(o.Seq), "verified_through=" + itoa(d.v)}}, false, "")
	}
	// The version the SQL side must reflect: verified (seq <= V) or
	// already retained as an order event. Only a version past the current
	// row's, or of an order without a row, is kept: it is drift.
	if o.Seq <= d.v || retained {
		if !cur.has || cur.ambiguous || o.Version > cur.v {
			if w := e.wantC[o.OrderID]; w == nil {
				cp := *o
				e.wantC[o.OrderID] = &cp
				e.wantOrder = append(e.wantOrder, o.OrderID)
			} else if o.Version > w.Version {
				*w = *o
			}
		}
	}
	if c != nil {
		if seq, ok := c.Seq.Get(); ok && seq == o.Seq && sameOrder(c, o) {
			return
		}
		if e.diffC[o.OrderID] == nil {
			e.diffC[o.OrderID] = &curDiff{row: *c, sv: *o}
			e.diffOrder = append(e.diffOrder, o.OrderID)
		}
	}
}

// endOrders checks the rows no source event claimed and the current rows
// against the newest version the SQL side must reflect.
func (e *engine) endOrders(rest HistoryRows) error {
	d := e.d
	d.cur = checkOrdersDecl
	var events []OrderRow
	for _, r := range e.pendE {
		events = append(events, *r)
	}
	for i := range rest.OrderEvents {
		r := &rest.OrderEvents[i]
		if k := (orderKey{r.OrderID, r.Version}); !e.aheadE[k] {
			events = append(events, *r)
		}
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].OrderID != events[j].OrderID {
			return events[i].OrderID < events[j].OrderID
		}
		return events[i].Version < events[j].Version
	})
	for i := range events {
		d.compareOrder(TableOrderEvents, &events[i], nil, nil)
	}

	rows := map[string]*OrderRow{} // current rows known at the end
	for _, r := range e.pendC {
		e.unpairedC = append(e.unpairedC, *r)
	}
	for i := range rest.Orders {
		if r := &rest.Orders[i]; !e.aheadC[r.OrderID] {
			e.unpairedC = append(e.unpairedC, *r)
		}
	}
	sort.SliceStable(e.unpairedC, func(i, j int) bool { return e.unpairedC[i].OrderID < e.unpairedC[j].OrderID })
	for i := range e.unpairedC {
		r := &e.unpairedC[i]
		if rows[r.OrderID] == nil {
			rows[r.OrderID] = r
			d.compareOrder(TableOrders, r, nil, nil)
		}
	}
	for _, id := range e.diffOrder {
		if rows[id] == nil {
			rows[id] = &e.diffC[id].row
		}
	}
	// The current rows of orders with a newer wanted version (or none):
	// read back the ones the stream did not keep.
	var look []string
	for _, id := range e.wantOrder {
		if _, has, _ := e.cur.version(id); has && rows[id] == nil {
			look = append(look, id)
		}
	}
	if len(look) > 0 {
		back, err := e.h.OrdersByID(e.ctx, look)
		if err != nil {
			return e.histErr("orders by id", err)
		}
		for i := range back {
			if r := &back[i]; rows[r.OrderID] == nil {
				rows[r.OrderID] = r
			}
		}
	}
	rewound := func(r *OrderRow) *wire.Order {
		if w := e.wantC[r.OrderID]; w != nil && r.Seq.Valid() && w.Version > r.Version {
			return w
		}
		return nil
	}
	ids := make([]string, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := rows[id]
		w := rewound(r)
		if c := e.diffC[id]; c != nil {
			d.compareOrder(TableOrders, &c.row, &c.sv, w)
		}
		if w != nil {
			d.emit(OrderNeverRewound, orderRecord(r.OrderID), orderRowFields(r), srcOrderFields(w),
				RootCause{Code: CauseVersionRewound, Confidence: Likely,
					Hint:     "the current row is older than a verified version: a late redelivery overwrote a newer version (a write without the version guard)",
					Evidence: []string{"row_version=" + itoa(r.Version), "newest_verified_version=" + itoa(w.Version)}}, false, "")
		}
	}
	for _, id := range e.wantOrder {
		if rows[id] != nil {
			continue
		}
		w := e.wantC[id]
		d.emit(OrderSourceRetained, orderRecord(id), nil, srcOrderFields(w),
			RootCause{Code: CauseRowDeleted, Confidence: Likely,
				Hint:     "the order has verified versions but no current row: the row was deleted (or never written)",
				Evidence: []string{"newest_verified_version=" + itoa(w.Version), "seq=" + itoa(w.Seq)}}, false, "")
	}
	return nil
}
