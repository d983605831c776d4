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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/projection-recovery/projection-recovery/internal/wire"
)

// The differential test: the report and plan of every seeded world, byte
// for byte, as the materialised detection (the one that held the whole
// history) produced them, recorded under testdata/differential before it
// was replaced. The streaming detection must reproduce each one whatever
// its page size. PROJECTION_UPDATE_GOLDEN=1 rewrites the files (only ever
// from a detection known to be right).

type world struct {
	name string
	snap func() *Snapshot
}

// differentialWorlds: every scenario's drift on the fixture, and seeded
// worlds carrying several drifts at once (rows re-sequenced forward and
// backward across pages, legacy rows, rows past B, backlog under a lowered
// cursor, rewound and deleted current rows, duplicated trade_seqs).
func differentialWorlds() []world {
	var ws []world
	for _, sc := range allScenarios() {
		sc := sc
		ws = append(ws, world{"scenario-" + sc.name, func() *Snapshot { s := fixture(fxCmds); sc.mutate(s); return s }})
	}
	for seed := int64(1); seed <= 40; seed++ {
		seed := seed
		ws = append(ws, world{fmt.Sprintf("seeded-%02d", seed), func() *Snapshot { return seededWorld(seed) }})
	}
	ws = append(ws, world{"clean-200", func() *Snapshot { return fixture(200) }})
	// Openings against bases and trades: the fold at a basis that precedes
	// the key's opening starts flat; two openings, or a trade before the
	// opening, leave the key without a proven opening.
	ws = append(ws,
		world{"opening-after-basis", func() *Snapshot {
			s := fixture(fxCmds)
			s.basisOf(fxAccount(1), "ETH-USD").BasisSeq = 1
			return s
		}},
		world{"opening-after-basis-below-cursor", func() *Snapshot {
			s := fixture(fxCmds)
			s.basisOf(fxAccount(0), "BTC-USD").BasisSeq = 0
			s.SQL.Cursor.VerifiedThroughSeq = 9
			return s
		}},
		world{"two-openings", func() *Snapshot {
			s := fixture(fxCmds)
			s.Source.Openings = append(s.Source.Openings, wire.Opening{Seq: 12, Account: fxAccount(0), Instrument: "BTC-USD", Quantity: d("3"), AvgCost: d("99")},
				wire.Opening{Seq: 13, Account: fxAccount(0), Instrument: "BTC-USD", Quantity: d("4"), AvgCost: d("98")})
			s.Source.EventCount += 2
			return s
		}},
		world{"opening-after-trades", func() *Snapshot {
			s := fixture(fxCmds)
			s.Source.Openings = append(s.Source.Openings, wire.Opening{Seq: 11, Account: fxAccount(2), Instrument: "BTC-USD", Quantity: d("5"), AvgCost: d("101")})
			s.Source.EventCount++
			s.pos(fxAccount(2), "BTC-USD").OpeningQuantity = d("5")
			return s
		}})
	return ws
}

// seededWorld plants between one and eight drifts drawn by seed on a
// fixture of 60 commands (seq 3..62).
func seededWorld(seed int64) *Snapshot {
	rng := rand.New(rand.NewSource(seed))
	s := fixture(60)
	n := 1 + rng.Intn(8)
	for i := 0; i < n; i++ {
		drifts[rng.Intn(len(drifts))](s, rng)
	}
	return s
}

func pickTrade(s *Snapshot, rng *rand.Rand) *TradeRow {
	return &s.SQL.Trades[rng.Intn(len(s.SQL.Trades))]
}
func pickEvent(s *Snapshot, rng *rand.Rand) *OrderRow {
	return &s.SQL.OrderEvents[rng.Intn(len(s.SQL.OrderEvents))]
}
func pickOrder(s *Snapshot, rng *rand.Rand) *OrderRow {
	return &s.SQL.Orders[rng.Intn(len(s.SQL.Orders))]
}

var drifts = []func(s *Snapshot, rng *rand.Rand){
	func(s *Snapshot, rng *rand.Rand) { r := pickTrade(s, rng); r.Price = r.Price.Add(d("0.5")) },
	func(s *Snapshot, rng *rand.Rand) { s.removeTrade(pickTrade(s, rng).TradeID) },
	func(s *Snapshot, rng *rand.Rand) { // orphan at or below B
		cp := *pickTrade(s, rng)
		cp.TradeID, cp.TradeSeq = fmt.Sprintf("t-orphan-%d", rng.Intn(1000)), 9000+int64(rng.Intn(1000))
		s.SQL.Trades = append(s.SQL.Trades, cp)
	},
	func(s *Snapshot, rng *rand.Rand) { pickTrade(s, rng).Seq = NullSeq },
	func(s *Snapshot, rng *rand.Rand) {
		r := pickTrade(s, rng)
		r.Seq = Seq(int64(r.Seq) + int64(1+rng.Intn(30)))
	}, // later, maybe past B
	func(s *Snapshot, rng *rand.Rand) {
		r := pickTrade(s, rng)
		r.Seq = Seq(max(1, int64(r.Seq)-int64(1+rng.Intn(30))))
	},
	func(s *Snapshot, rng *rand.Rand) { pickTrade(s, rng).BookingStatus = "REJECTED" },
	func(s *Snapshot, rng *rand.Rand) {
		p := &s.SQL.Positions[rng.Intn(len(s.SQL.Positions))]
		p.Quantity = p.Quantity.Add(d("3"))
	},
	func(s *Snapshot, rng *rand.Rand) {
		i := rng.Intn(len(s.SQL.Positions))
		s.SQL.Positions = append(s.SQL.Positions[:i:i], s.SQL.Positions[i+1:]...)
	},
	func(s *Snapshot, rng *rand.Rand) {
		b := &s.SQL.Basis[rng.Intn(len(s.SQL.Basis))]
		b.Quantity = b.Quantity.Add(d("1"))
	},
	func(s *Snapshot, rng *rand.Rand) { r := pickEvent(s, rng); r.Remaining = r.Remaining.Add(d("1")) },
	func(s *Snapshot, rng *rand.Rand) {
		i := rng.Intn(len(s.SQL.OrderEvents))
		s.SQL.OrderEvents = append(s.SQL.OrderEvents[:i:i], s.SQL.OrderEvents[i+1:]...)
	},
	func(s *Snapshot, rng *rand.Rand) { // a current row rewound to version 1
		r := pickOrder(s, rng)
		for _, e := range s.SQL.OrderEvents {
			if e.OrderID == r.OrderID && e.Version == 1 {
				*r = e
			}
		}
	},
	func(s *Snapshot, rng *rand.Rand) {
		i := rng.Intn(len(s.SQL.Orders))
		s.SQL.Orders = append(s.SQL.Orders[:i:i], s.SQL.Orders[i+1:]...)
	},
	func(s *Snapshot, rng *rand.Rand) {
		r := pickEvent(s, rng)
		r.Seq = Seq(int64(r.Seq) + int64(1+rng.Intn(20)))
	},
	func(s *Snapshot, rng *rand.Rand) {
		r := pickEvent(s, rng)
		r.Seq = Seq(max(1, int64(r.Seq)-int64(1+rng.Intn(20))))
	},
	func(s *Snapshot, rng *rand.Rand) { pickEvent(s, rng).Seq = NullSeq },
	func(s *Snapshot, rng *rand.Rand) {
		r := pickOrder(s, rng)
		r.Seq = Seq(int64(r.Seq) + int64(1+rng.Intn(20)))
	},
	func(s *Snapshot, rng *rand.Rand) { pickOrder(s, rng).Seq = NullSeq },
	func(s *Snapshot, rng *rand.Rand) { // a second row claims a trade_seq
		cp := *pickTrade(s, rng)
		cp.TradeID = cp.TradeID + "-dup"
		s.SQL.Trades = append(s.SQL.Trades, cp)
	},
	func(s *Snapshot, rng *rand.Rand) { // a live row past B
		cp := *pickTrade(s, rng)
		cp.TradeID, cp.TradeSeq, cp.Seq = fmt.Sprintf("t-live-%d", rng.Intn(1000)), 8000+int64(rng.Intn(1000)), Seq(s.Source.Boundary+int64(1+rng.Intn(5)))
		s.SQL.Trades = append(s.SQL.Trades, cp)
	},
	func(s *Snapshot, rng *rand.Rand) { // the cursor claims less: a backlog above it
		if c := s.SQL.Cursor; c != nil {
			c.VerifiedThroughSeq = int64(10 + rng.Intn(40))
		}
	},
	func(s *Snapshot, rng *rand.Rand) { // the backlog is really missing
		v := int64(30 + rng.Intn(20))
		if c := s.SQL.Cursor; c != nil {
			c.VerifiedThroughSeq = v
		}
		var keep []TradeRow
		for _, r := range s.SQL.Trades {
			if int64(r.Seq) <= v || rng.Intn(2) == 0 {
				keep = append(keep, r)
			}
		}
		s.SQL.Trades = keep
	},
	func(s *Snapshot, rng *rand.Rand) {
		p := &s.SQL.Positions[rng.Intn(len(s.SQL.Positions))]
		p.OpeningQuantity = p.OpeningQuantity.Add(d("2"))
	},
	func(s *Snapshot, rng *rand.Rand) {
		p := &s.SQL.Positions[rng.Intn(len(s.SQL.Positions))]
		p.AvgCost = p.AvgCost.Add(d("0.25"))
	},
}

// runDetection is the detection under test with a page size (0: one page).
func runDetection(t testing.TB, s *Snapshot, pageSeqs int) (*Report, *Plan) {
	t.Helper()
	r, err := DetectHistory(context.Background(), s, newSnapshotHistory(s, pageSeqs))
	if err != nil {
		t.Fatal(err)
	}
	return r, mustPlan(t, r, s)
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

func goldenJSON(t testing.TB, r *Report, p *Plan) []byte {
	b, err := json.MarshalIndent(struct {
		Report *Report `json:"report"`
		Plan   *Plan   `json:"plan"`
	}{r, p}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestDifferential_StreamingMatchesMaterialised(t *testing.T) {
	update := os.Getenv("PROJECTION_UPDATE_GOLDEN") == "1"
	names := map[string]bool{}
	for _, w := range differentialWorlds() {
		file := filepath.Join("testdata", "differential", unsafeName.ReplaceAllString(w.name, "_")+".json")
		if names[file] {
			t.Fatalf("two worlds write %s", file)
		}
		names[file] = true
		t.Run(w.name, func(t *testing.T) {
			if update {
				r, p := runDetection(t, w.snap(), 0)
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, goldenJSON(t, r, p), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, pages := range []int{0, 1, 3, 7} {
				r, p := runDetection(t, w.snap(), pages)
				if got := goldenJSON(t, r, p); !bytes.Equal(got, want) {
					t.Fatalf("page size %d: report and plan differ from the materialised detection's (%s):\n%s", pages, file, firstDiff(got, want))
				}
			}
		})
	}
}

// firstDiff shows the first differing line of two texts with its neighbours.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			from := max(0, i-3)
			ctx := ""
			for j := from; j < i && j < len(w); j++ {
				ctx += "   " + string(w[j]) + "\n"
			}
			return fmt.Sprintf("line %d:\n%s - want %s\n + got  %s", i+1, ctx, wl, gl)
		}
	}
	return ""
}
