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

package store

import (
	"crypto/sha256"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/projection-recovery/projection-recovery/internal/codes"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/position"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// key is a position key.
type key struct{ account, instrument string }

// prepared is one write slice of a page, checked and decoded before any
// transaction starts: pure work (decoding, hashing) never holds the
// projection write lock. A slice is a page in every respect the transaction
// checks (its own window, its own chain digests at both ends); see
// slicePage.
type prepared struct {
	page        *source.Page
	after       int64         // A: the cursor the slice must start at
	digestAfter string        // chain digest through after
	through     int64         // T': the slice's end (the page's throughSeq, or frozen_seq for a DRAINING run if lower, for the last slice)
	digest      string        // chain digest through T'
	applied     int           // events of the slice (all with after < seq <= T')
	trades      []*wire.Trade // the slice's trades, in order
	orders      []*wire.Order
	orderBy     orderIndex // the PAGE's order versions: in the slice only if seq is in its window (orderOf)
	openings    map[key]*wire.Opening
	keys        []key // position keys the slice re-derives (trade legs, openings)
	seenKey     map[key]bool
	lockKeys    []key // keys the slice locks: keys plus its order versions' (KeyLocks)
	seenLock    map[key]bool
	fills       map[key][]fillRow // slice trade legs by key (for trades found missing)
	flush       bool              // no event: re-derives deferred keys in full at the cursor (flushDeferred)
	spans       bool              // its events come from more than one merged page (page_merge.go)
}

func newSlice(page *source.Page, after int64, digestAfter string, orderBy orderIndex) *prepared {
	return &prepared{page: page, after: after, digestAfter: digestAfter, orderBy: orderBy,
		openings: map[key]*wire.Opening{}, seenKey: map[key]bool{}, seenLock: map[key]bool{}, fills: map[key][]fillRow{}}
}

// lockKey adds k to the keys the slice locks.
func (p *prepared) lockKey(k key) {
	if !p.seenLock[k] {
		p.seenLock[k] = true
		p.lockKeys = append(p.lockKeys, k)
	}
}

// orderOf is the slice's source event for an order version, nil when the
// version is not in the slice. The map is the page's, shared by its slices:
// the page has at most one event per version (checkDecoded), and the
// slice's events are exactly the page's with after < seq <= through.
func (p *prepared) orderOf(k orderKey) *wire.Order {
	if o := p.orderBy.get(k); o != nil && o.Seq > p.after && o.Seq <= p.through {
		return o
	}
	return nil
}

func (p *prepared) addKey(k key) {
	if !p.seenKey[k] {
		p.seenKey[k] = true
		p.keys = append(p.keys, k)
	}
	p.lockKey(k)
}

// add puts one decoded event of the slice into the rows and maps the
// transaction needs; n is a trade's amounts as prepare converted them.
func (p *prepared) add(e wire.Event, n *tradeNums) {
	p.applied++
	switch {
	case e.Trade != nil:
		t := e.Trade
		p.trades = append(p.trades, t)
		bk, sk := key{t.BuyAccount, t.Instrument}, key{t.SellAccount, t.Instrument}
		p.addKey(bk)
		p.addKey(sk)
		p.fills[bk] = append(p.fills[bk], fillRow{t: t, leg: 0, n: n})
		p.fills[sk] = append(p.fills[sk], fillRow{t: t, leg: 1, n: n})
	case e.Order != nil:
		p.orders = append(p.orders, e.Order)
		p.lockKey(key{e.Order.Account, e.Order.Instrument})
	case e.Opening != nil:
		k := key{e.Opening.Account, e.Opening.Instrument}
		p.openings[k] = e.Opening
		p.addKey(k)
	}
}

// tsSQL is the SQL representation of a source timestamp: timestamptz keeps
// microseconds and pgx truncates (never rounds) the nanoseconds when encoding,
// so the reviewed comparator is "row ts == source ts truncated to the
// microsecond". Comparing at nanoseconds would refuse every correct row;
// rounding would disagree with what the live projector wrote.
func tsSQL(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// pagePrep is a whole page verified before any transaction: header,
// ordering, chain, explicit-recovery checkpoint, decoding and the page-wide
// duplicate rules. Write slices are cut from it on demand (nextSlice), so
// that each slice's size can follow how long the previous one held the
// projection write lock (slice.go).
type pagePrep struct {
	page    *source.Page
	decoded []wire.Event        // the applied events (seq <= through)
	digests [][sha256.Size]byte // digests[i]: the chain through event i, raw
	orderBy orderIndex          // the applied order versions
	through int64               // T': throughSeq, or frozen_seq for a DRAINING run if lower
	// nums[j] are the amounts of the j-th trade of decoded as the fold
	// takes them, converted here, beside the commit of the unit before,
	// rather than between a slice's statements (see tradeNums).
	nums []tradeNums

	next        int    // first event not yet in a slice
	nextTrade   int    // index in nums of the first trade not yet in a slice
	after       int64  // where the next slice starts
	digestAfter string // chain digest through after
	cut         int    // slices cut so far

	// ends are the indexes in decoded where a merged page ended and the
	// next began (page_merge.go); bounded: slices end there (ApplyPrepared
	// sets it when a slice across one was refused).
	ends    []pageEnd
	bounded bool
	// tradeIDs and openingKeys hold, per fetched page of the unit, its
	// trade ids and openings' keys (checkDecoded), which Merge checks the
	// next page against.
	tradeIDs    unitMaps[string, bool]
	openingKeys unitMaps[key, bool]
}

// pageEnd is where a merged page ended: the index in decoded of the next
// page's first event, and the page's throughSeq and digestThrough (a slice
// ending there ends where the page did).
type pageEnd struct {
	i       int
	through int64
	digest  string
}

// sliceMark is where the next slice of a pagePrep starts: ApplyPrepared
// rewinds to it to cut a refused slice again, page by page.
type sliceMark struct {
	next, cut   int
	nextTrade   int
	after       int64
	digestAfter string
}

func (pp *pagePrep) mark() sliceMark {
	return sliceMark{next: pp.next, cut: pp.cut, nextTrade: pp.nextTrade, after: pp.after, digestAfter: pp.digestAfter}
}

func (pp *pagePrep) rewind(m sliceMark) {
	pp.next, pp.cut, pp.nextTrade, pp.after, pp.digestAfter = m.next, m.cut, m.nextTrade, m.after, m.digestAfter
}

// limit is where the slice starting at from must end at the latest: the
// next merged page's start when bounded, the unit's end otherwise.
func (pp *pagePrep) limit(from int) int {
	if pp.bounded {
		for _, e := range pp.ends {
			if e.i > from {
				return e.i
			}
		}
	}
	return len(pp.decoded)
}

// spans reports whether the events [from, to) come from more than one
// merged page.
func (pp *pagePrep) spans(from, to int) bool {
	for _, e := range pp.ends {
		if e.i > from && e.i < to {
			return true
		}
	}
	return false
}

// endAt is the merged page that ended just before decoded[i], if any.
func (pp *pagePrep) endAt(i int) (pageEnd, bool) {
	for _, e := range pp.ends {
		if e.i == i {
			return e, true
		}
	}
	return pageEnd{}, false
}

// prepare verifies identity, ordering, decoding and the chain of the WHOLE
// page (FR-APR03/06/07). It does not know the cursor; each slice's
// transaction checks its after and digestAfter against it. Slices are cut
// only from a page that verified as a whole: a page whose chain or any event
// fails writes nothing, not even a first slice.
func prepare(run Run, page *source.Page) (*pagePrep, error) {
	if err := run.Eligible(); err != nil {
		return nil, err
	}
	if page == nil {
		return nil, refuse(codes.OrderingViolation, "nil page")
	}
	switch {
	case page.ProtocolVersion != wire.ProtocolVersion:
		return nil, refuse(codes.ProtocolMismatch, "page protocol %d, consumer speaks %d", page.ProtocolVersion, wire.ProtocolVersion)
	case page.ProtocolVersion != run.ProtocolVersion:
		return nil, refuse(codes.ProtocolMismatch, "page protocol %d, run %d", page.ProtocolVersion, run.ProtocolVersion)
	case page.DescriptorHash != run.DescriptorHash:
		return nil, refuse(codes.DescriptorMismatch, "page descriptor %s, run %s", page.DescriptorHash, run.DescriptorHash)
	case !chain.Valid(page.DigestAfter) || !chain.Valid(page.DigestThrough):
		return nil, refuse(codes.ChainMismatch, "page digests are not 64 lowercase hex")
	case page.AfterSeq < 0 || page.AfterSeq > page.ThroughSeq || page.ThroughSeq > page.BoundarySeq:
		return nil, refuse(codes.OrderingViolation, "need 0 <= afterSeq %d <= throughSeq %d <= boundarySeq %d", page.AfterSeq, page.ThroughSeq, page.BoundarySeq)
	case page.Idle && (len(page.Events) > 0 || page.ThroughSeq != page.AfterSeq || page.AfterSeq != page.BoundarySeq):
		return nil, refuse(codes.OrderingViolation, "idle page must be empty with afterSeq == throughSeq == boundarySeq")
	}
	if c := run.RecoveryCheckpointDescriptorHash; c != "" && c != page.DescriptorHash {
		return nil, refuse(codes.ExplicitCheckpointMismatch, "explicit-recovery checkpoint descriptor %s, page %s", c, page.DescriptorHash)
	}
	if v := run.RecoveryCheckpointProtocolVersion; v != 0 && v != page.ProtocolVersion {
		return nil, refuse(codes.ExplicitCheckpointMismatch, "explicit-recovery checkpoint protocol %d, page %d", v, page.ProtocolVersion)
	}

	through := page.ThroughSeq
	if run.Phase == PhaseDraining {
		// FR-APR09: a DRAINING scope is caught up only to its frozen sequence.
		f := *run.FrozenSeq
		if page.AfterSeq > f {
			return nil, refuse(codes.BeyondFrozen, "afterSeq %d is past frozen seq %d", page.AfterSeq, f)
		}
		through = min(through, f)
	}

	// Chain: recompute every digest from digestAfter; the whole page must hash
	// to digestThrough even when a DRAINING run keeps only a prefix, since that
	// is what proves the kept events authentic. digests[i] is the chain
	// through event i: a slice ending there starts the next one from it.
	// Digests are kept raw (32 bytes an event, no string): a slice needs
	// the hex form only where it ends.
	digests := make([][sha256.Size]byte, len(page.Events))
	f := chain.NewFolder(page.DigestAfter)
	ckpt := -1 // index of the last event at or before the checkpoint seq
	last, applied := page.AfterSeq, 0
	for i, ev := range page.Events {
		if ev.Seq <= page.AfterSeq || ev.Seq > page.ThroughSeq || ev.Seq < last {
			return nil, refuse(codes.OrderingViolation, "event %d has seq %d outside (%d, %d] or before %d", i, ev.Seq, page.AfterSeq, page.ThroughSeq, last)
		}
		last = ev.Seq
		digests[i] = f.Next(ev.Wire)
		if ck := run.RecoveryCheckpointSeq; ck != nil && ev.Seq <= *ck {
			ckpt = i
		}
		if ev.Seq <= through {
			applied++ // events beyond frozen are hashed for authenticity, never applied
		}
	}
	if !f.Is(page.DigestThrough) {
		d := page.DigestAfter
		if len(digests) > 0 {
			d = chain.Hex(digests[len(digests)-1])
		}
		return nil, refuse(codes.ChainMismatch, "events hash to %s, page claims digestThrough %s", d, page.DigestThrough)
	}
	// FR-APR07: the explicit-recovery checkpoint is only an identity
	// cross-check: when the page covers its seq, the chain there must match.
	if ck := run.RecoveryCheckpointSeq; ck != nil && run.RecoveryCheckpointDigest != "" &&
		*ck >= page.AfterSeq && *ck <= page.ThroughSeq {
		ckptDigest := page.DigestAfter
		if ckpt >= 0 {
			ckptDigest = chain.Hex(digests[ckpt])
		}
		if ckptDigest != run.RecoveryCheckpointDigest {
			return nil, refuse(codes.ExplicitCheckpointMismatch, "chain at explicit-recovery checkpoint seq %d is %s, run records %s", *ck, ckptDigest, run.RecoveryCheckpointDigest)
		}
	}
	decoded, err := decodeAll(page.Events[:applied])
	if err != nil {
		return nil, err
	}
	ids, err := checkDecoded(page, decoded)
	if err != nil {
		return nil, err
	}
	return &pagePrep{page: page, decoded: decoded, digests: digests[:applied], orderBy: orderIndex{ids.orders}, nums: numsOf(decoded, len(ids.trades)), through: through,
		after: page.AfterSeq, digestAfter: page.DigestAfter,
		tradeIDs: unitMaps[string, bool]{ids.trades}, openingKeys: unitMaps[key, bool]{ids.openings}}, nil
}

// pageIdentities are the page's trade ids, order versions (with their
// events) and openings' keys.
type pageIdentities struct {
	trades   map[string]bool
	orders   map[orderKey]*wire.Order
	openings map[key]bool
}

// checkDecoded applies the page-wide rules to the decoded events: the wire
// seq is the page's, and no trade, order version or opening appears twice in
// the PAGE (not only within a slice). It returns what it checked, which
// Merge checks across pages.
func checkDecoded(page *source.Page, decoded []wire.Event) (pageIdentities, error) {
	nt, no := 0, 0
	for _, e := range decoded {
		switch {
		case e.Trade != nil:
			nt++
		case e.Order != nil:
			no++
		}
	}
	// Sized exactly: a map that outgrows its hint copies itself.
	trades := make(map[string]bool, nt)
	orders := make(map[orderKey]*wire.Order, no)
	openings := map[key]bool{}
	for i, e := range decoded {
		ev := page.Events[i]
		if e.Seq() != ev.Seq {
			return pageIdentities{}, refuse(codes.OrderingViolation, "event %d: page seq %d, wire seq %d", i, ev.Seq, e.Seq())
		}
		switch {
		case e.Trade != nil:
			if trades[e.Trade.TradeID] {
				return pageIdentities{}, refuse(codes.OrderingViolation, "trade %s appears twice in the page", e.Trade.TradeID)
			}
			trades[e.Trade.TradeID] = true
		case e.Order != nil:
			ok := orderKey{e.Order.OrderID, e.Order.Version}
			if orders[ok] != nil {
				return pageIdentities{}, refuse(codes.OrderingViolation, "order %s version %d appears twice in the page", ok.id, ok.version)
			}
			orders[ok] = e.Order
		case e.Opening != nil:
			k := key{e.Opening.Account, e.Opening.Instrument}
			if openings[k] {
				return pageIdentities{}, refuse(codes.OpeningConflict, "two openings for %s/%s in the page", k.account, k.instrument)
			}
			openings[k] = true
		default:
			return pageIdentities{}, refuse(codes.MalformedEvent, "event at seq %d has no payload", ev.Seq)
		}
	}
	return pageIdentities{trades: trades, orders: orders, openings: openings}, nil
}

// done reports whether every slice of the page has been cut (an empty or
// idle page still has one, which moves nothing but the verification time).
func (pp *pagePrep) done() bool { return pp.cut > 0 && pp.next == len(pp.decoded) }

// nextSlice cuts the next write slice: at least n events (n <= 0: the rest
// of the page), extended to the end of the command the n-th event belongs
// to, and ended early after the command that brings its keys to
// maxSliceKeys (each key is a lock the slice holds; see KeyLocks). Slices end only between two events of different seqs, because a
// command's events share its consensus seq and the cursor moves by whole
// seqs; the last slice ends at through, which may lie past its last event
// (the page's throughSeq also covers commands without outputs).
func (pp *pagePrep) nextSlice(n int) *prepared {
	sl := newSlice(pp.page, pp.after, pp.digestAfter, pp.orderBy)
	i, limit := pp.next, pp.limit(pp.next)
	for ; i < limit; i++ {
		if ((n > 0 && sl.applied >= n) || len(sl.lockKeys) >= maxSliceKeys) && pp.decoded[i].Seq() != pp.decoded[i-1].Seq() {
			break
		}
		var n *tradeNums
		if pp.decoded[i].Trade != nil {
			n, pp.nextTrade = &pp.nums[pp.nextTrade], pp.nextTrade+1
		}
		sl.add(pp.decoded[i], n)
	}
	sl.spans = pp.spans(pp.next, i)
	pp.next, pp.cut = i, pp.cut+1
	if i == len(pp.decoded) {
		sl.through, sl.digest = pp.through, pp.digestAfter
		if i > 0 {
			sl.digest = chain.Hex(pp.digests[i-1])
		}
	} else if e, ok := pp.endAt(i); ok {
		sl.through, sl.digest = e.through, e.digest
	} else {
		sl.through, sl.digest = pp.decoded[i-1].Seq(), chain.Hex(pp.digests[i-1])
	}
	pp.after, pp.digestAfter = sl.through, sl.digest
	return sl
}

// orderKey identifies an order version.
type orderKey struct {
	id      string
	version int64
}

// unitMaps holds one map per fetched page of a unit, as checkDecoded built
// it: a unit's order versions with their events (orderIndex), its trade ids
// and its openings' keys (pagePrep.tradeIDs, openingKeys). A merged unit
// keeps its pages' maps rather than copying them into one (Merge): a copy
// paid a map insert per entry, and the growth of the map (for the order
// versions, a sixth of the unit's preparation) on a 2-core machine beside
// PostgreSQL. A key is in at most one of them (Merge refuses pages that
// share one). A unit of many small pages (pageSize down to 1, pagesPerCycle
// up to 1,000) must not make every lookup read hundreds of maps, nor Merge's
// identity check grow with the square of the unit's pages: past maxUnitMaps,
// the last map takes in the entries of the pages after it (join), which
// copies only small pages' entries.
type unitMaps[K comparable, V any] []map[K]V

// orderIndex is a unit's order versions with their events.
type orderIndex = unitMaps[orderKey, *wire.Order]

// maxUnitMaps bounds the maps a lookup in unitMaps reads.
const maxUnitMaps = 4

// join appends y's maps to x (join consumes y: x's last map may take in y's
// entries); see unitMaps.
func (x unitMaps[K, V]) join(y unitMaps[K, V]) unitMaps[K, V] {
	for _, m := range y {
		if len(x) < maxUnitMaps {
			x = append(x, m)
			continue
		}
		last := x[len(x)-1]
		for k, v := range m {
			last[k] = v
		}
	}
	return x
}

// get is k's entry, the zero value (nil, false) when no page of the unit
// holds it.
func (x unitMaps[K, V]) get(k K) V {
	for _, m := range x {
		if v, ok := m[k]; ok {
			return v
		}
	}
	var zero V
	return zero
}

// decodeAll decodes wire bytes on all cores: decoding is the dominant Go cost
// of a page and each event decodes independently. The first failure (lowest
// index) wins, so the refusal is deterministic.
func decodeAll(evs []source.Event) ([]wire.Event, error) {
	out := make([]wire.Event, len(evs))
	// Each worker keeps its chunk's first failure; chunks are in index
	// order, so the first worker with one holds the page's first.
	type failure struct {
		i   int
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	if workers > 8 {
		workers = 8
	}
	if len(evs) < 256 {
		workers = 1
	}
	var wg sync.WaitGroup
	chunk := (len(evs) + workers - 1) / workers
	fails := make([]failure, workers)
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(evs))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				var err error
				if out[i], err = wire.Decode(evs[i].Wire); err != nil {
					fails[w] = failure{i, err}
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range fails {
		if f.err != nil {
			return nil, &codes.Refusal{Code: codes.MalformedEvent, Detail: "event at seq " + strconv.FormatInt(evs[f.i].Seq, 10), Err: f.err}
		}
	}
	return out, nil
}

// fillRow is one trade leg of a key: the buy leg (0) adds the trade's
// quantity, the sell leg (1) subtracts it. n holds the trade's amounts
// converted when the page was prepared (nil: converted when needed).
type fillRow struct {
	t   *wire.Trade
	leg int
	n   *tradeNums
}

// tradeNums are a trade's quantity and price as the fold takes them
// (position.Num), converted by prepare where the unit is decoded rather than
// by the applying goroutine between a slice's statements, under the lock
// (docs/design/page-transaction.md, "Encoding off the applying goroutine").
type tradeNums struct{ qty, price position.Num }

// numsOf converts the amounts of decoded's trades (trades of them), in order.
func numsOf(decoded []wire.Event, trades int) []tradeNums {
	nums := make([]tradeNums, 0, trades)
	for _, e := range decoded {
		if t := e.Trade; t != nil {
			nums = append(nums, tradeNums{qty: position.NumOf(t.Quantity), price: position.NumOf(t.Price)})
		}
	}
	return nums
}

// num is the leg as the fold takes it: the buy leg adds the trade's
// quantity, the sell leg subtracts it. Built from the trade's decimals
// without the big.Int copies of decimal's Neg and Coefficient (one per leg
// of every trade a catch-up derives); TestFillRowNum holds it to
// position.Fill's own conversion.
func (f fillRow) num() position.NumFill {
	n := f.n
	if n == nil {
		n = &tradeNums{qty: position.NumOf(f.t.Quantity), price: position.NumOf(f.t.Price)}
	}
	q := n.qty
	if f.leg == 1 {
		q = q.Neg()
	}
	return position.NumFill{Seq: f.t.Seq, TradeSeq: f.t.TradeSeq, Leg: f.leg, Quantity: q, Price: n.price}
}
