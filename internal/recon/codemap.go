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

// RefusalInvariants maps every blocking catch-up refusal code (the spelling
// of internal/codes, whose Transient() is false) to the invariants that
// explain it, so an operator who sees a scope BLOCKED with a code can run a
// reconciliation and find the records behind it. The codes are spelled as
// strings, not imported: internal/codes links the PostgreSQL driver, and
// detection must not (TestGuard_NoWritePathImports).
// TestRefusal_EveryBlockingCodeHasAnInvariant fails when a blocking code
// of internal/codes is neither here nor in RefusalExclusions, or when a
// spelling here is not a code.
var RefusalInvariants = map[string][]InvariantID{
	"NOT_ELIGIBLE":                 {RunEligible, RunSingleSelected},
	"DESCRIPTOR_MISMATCH":          {CursorIdentityAgrees},
	"PROTOCOL_MISMATCH":            {CursorIdentityAgrees},
	"EXPLICIT_CHECKPOINT_MISMATCH": {CursorIdentityAgrees},
	"CHAIN_MISMATCH":               {CursorChainAgrees, CursorEventCountAgrees},
	"HISTORY_REWRITTEN":            {CursorChainAgrees, TradePresentInSource},
	"BEYOND_FROZEN":                {CursorWithinBoundary},
	"ORPHAN_TRADE":                 {TradePresentInSource},
	"ORPHAN_ORDER":                 {OrderPresentInSource},
	"IMMUTABLE_TRADE_CONFLICT":     {TradeImmutableAgrees, TradeIdentityUnique},
	"REJECTED_BOOKING":             {TradeBookingAccepted},
	"TRADE_PROVENANCE_CONFLICT":    {TradeProvenance},
	"ORDER_PROVENANCE_CONFLICT":    {OrderVersionAgrees},
	"ORDER_ROW_MISMATCH":           {OrderVersionAgrees, OrderNeverRewound},
	"OPENING_CONFLICT":             {OpeningProven},
	"UNEXPLAINED_BALANCE":          {PositionDerivationAgrees, PositionSourceBacked, PositionBasisAgrees},
	"UNKNOWN_LEGACY_HISTORY":       {TradeProvenance, OrderVersionAgrees},
	"UNPROVEN_INITIAL_BALANCE":     {OpeningProven},
}

// RefusalExclusions are the blocking codes no SQL invariant explains, each
// with the reason: they are about the source itself (its pages, its bytes,
// its archive) or about the operator, not about drift between ledger and
// cache.
var RefusalExclusions = map[string]string{
	"SOURCE_REFUSED":      "the member refused the page (missing genesis, discontinuity, archive behind B): the source itself",
	"SOURCE_VERIFICATION": "the source client rejected a page that failed verification: the source itself",
	"MALFORMED_EVENT":     "wire bytes that do not decode: the source's bytes, not the projection",
	"ORDERING_VIOLATION":  "page coordinates or event sequences out of order: the source's page",
	"INTERNAL":            "a bug in the operator, not drift: read the manager's log",
	"SCHEMA_MISSING":      "recovery's tables are absent: no snapshot can be read (snapshot_unavailable); run the migration",
}
