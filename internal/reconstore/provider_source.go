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
	"context"
	"fmt"
	"slices"

	"github.com/projection-recovery/projection-recovery/internal/chain"
	"github.com/projection-recovery/projection-recovery/internal/recon"
	"github.com/projection-recovery/projection-recovery/internal/source"
	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// readSource reads the member's verified events from genesis through its
// boundary B (the first page's), page after page, decoding each into the
// snapshot and dropping its bytes before the next. Stopping at the first
// page's boundary keeps a busy member from prolonging the read forever.
// want lists the seqs whose chain points detection compares; each inside
// (0, B] is recorded by refolding only its page. Complete is set only at the
// end of a read that reached B with every page verified; any error returns
// no side at all. hint presizes the slices (a clean read allocates each
// once); limit caps the events read, failing before the page that would
// pass it is decoded (docs/design/repairs.md, "Reading the source side").
func readSource(ctx context.Context, f Fetcher, max int, want []int64, hint sourceHint, in *interner, limit int64) (recon.SourceSide, int, error) {
	out := recon.SourceSide{Trades: sized[wire.Trade](hint.trades), Orders: sized[wire.Order](hint.orders)}
	want = slices.Clone(want)
	slices.Sort(want)
	want = slices.Compact(want)
	after, digest, expect := int64(0), chain.Genesis, ""
	var count int64
	first := int64(-1)
	pages := 0
	for {
		if err := ctx.Err(); err != nil {
			return recon.SourceSide{}, pages, err
		}
		p, err := f.Fetch(ctx, after, digest, expect, max)
		if err != nil {
			return recon.SourceSide{}, pages, fmt.Errorf("page after seq %d: %w", after, err)
		}
		pages++
		if first < 0 {
			// Every later page must carry the descriptor of the first: the
			// read is one history or none.
			first, expect = p.BoundarySeq, p.DescriptorHash
			out.DescriptorHash, out.ProtocolVersion = p.DescriptorHash, p.ProtocolVersion
		}
		if n := count + int64(len(p.Events)); n > limit {
			return recon.SourceSide{}, pages, fmt.Errorf("%w: the source holds more than the snapshot cap of %d events through its boundary %d (%d read by seq %d)",
				recon.ErrSnapshotTooLarge, limit, first, n, p.ThroughSeq)
		}
		for len(want) > 0 && want[0] <= after {
			want = want[1:] // at or before a previous page's end: recorded there, or 0
		}
		if len(want) > 0 && want[0] <= p.ThroughSeq {
			out.Chain, want = chainPoints(p, count, want, out.Chain)
		}
		for i := range p.Events {
			ev, err := wire.Decode(p.Events[i].Wire)
			if err != nil { // the client decoded it already: unreachable unless the client changed
				return recon.SourceSide{}, pages, fmt.Errorf("decode event %d of the page after seq %d: %w", i, after, err)
			}
			switch {
			case ev.Trade != nil:
				t := ev.Trade
				in.decodedStrsIn(&t.Instrument, &t.BuyAccount, &t.SellAccount)
				in.decodedIDsIn(&t.TradeID, &t.BuyOrderID, &t.SellOrderID)
				t.Price, t.Quantity = in.decimal(t.Price), in.decimal(t.Quantity)
				out.Trades = append(out.Trades, *t)
			case ev.Order != nil:
				o := ev.Order
				in.decodedStrsIn(&o.Account, &o.Instrument)
				in.decodedIDsIn(&o.OrderID)
				o.Price, o.Quantity, o.Remaining = in.decimal(o.Price), in.decimal(o.Quantity), in.decimal(o.Remaining)
				out.Orders = append(out.Orders, *o)
			case ev.Opening != nil:
				o := ev.Opening
				in.decodedStrsIn(&o.Account, &o.Instrument)
				out.Openings = append(out.Openings, *o)
			default:
				return recon.SourceSide{}, pages, fmt.Errorf("event %d of the page after seq %d has no payload", i, after)
			}
		}
		count += int64(len(p.Events))
		after, digest = p.ThroughSeq, p.DigestThrough
		if p.Idle || p.ThroughSeq >= p.BoundarySeq || p.ThroughSeq >= first {
			break
		}
	}
	out.Boundary, out.Digest, out.EventCount, out.Complete = after, digest, count, true
	return out, pages, nil
}

// sourceHint sizes the source side's slices.
type sourceHint struct{ trades, orders int }

// chainPoints refolds page p from its digestAfter to record the chain at
// each wanted seq inside it (want is sorted; those past the page are
// returned). The digest through seq w is the fold over every event with
// seq <= w; a seq inside a command with no events has the digest of the last
// event before it.
func chainPoints(p *source.Page, count int64, want []int64, dst []recon.ChainPoint) ([]recon.ChainPoint, []int64) {
	d, n := p.DigestAfter, count
	i := 0
	for len(want) > 0 && want[0] <= p.ThroughSeq {
		for i < len(p.Events) && p.Events[i].Seq <= want[0] {
			d = chain.Next(d, p.Events[i].Wire)
			n++
			i++
		}
		dst = append(dst, recon.ChainPoint{Seq: want[0], Digest: d, EventCount: n})
		want = want[1:]
	}
	return dst, want
}
