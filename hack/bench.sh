#!/usr/bin/env bash
# make bench: every benchmark once (-benchtime=1x), figures reported as
# ratios measured in the same run. The store's catch-up runs at
# PROJECTION_BENCH_EVENTS (default 1,000,000) against the server's binary
# COPY of every row it wrote (a stream read before the clock starts); every
# timed phase starts on a settled cluster (pgtest.Settle); the other
# benchmarks run at their own sizes.
#
# The output is kept in bin/bench.out, and the run ends with one table
# (hack/benchtable): every figure issues 12 and 14 and the detection item of
# "Repairs an exchange can approve" set a goal for, measured in this run,
# with its goal and whether it is met (detection's at 4N = 4,000,000:
# make bench BENCH_EVENTS=4000000).
#
# PROJECTION_BENCH_COUNT=n (make bench BENCH_COUNT=n) runs the benchmarks
# whose goals the machine's noise can decide (the store's catch-up and
# re-verification, the live projector, the end-to-end catch-up) n times each; the table then shows
# each figure's median with its range and judges the goal on the median.
set -euo pipefail
events="${PROJECTION_BENCH_EVENTS:-1000000}"
count="${PROJECTION_BENCH_COUNT:-1}"
flags=(-count=1 -run '^$' -benchtime=1x -benchmem -timeout=90m)
repeated=(-count="${count}" -run '^$' -benchtime=1x -benchmem -timeout=300m)
out="bin/bench.out"
mkdir -p bin
run_all() {
echo "bench: source contract (full catch-up, N and 4N, with and without the replay cache)"
go test "${flags[@]}" -bench . ./internal/reference/member
echo "bench: store catch-up from genesis, ${events} events, against COPY (${count}x)"
PROJECTION_BENCH_EVENTS="${events}" go test "${repeated[@]}" -bench CatchUpFromGenesis ./internal/store
echo "bench: store re-verification after a cursor reset (same size, ${count}x)"
go test "${repeated[@]}" -bench ReverifyFromGenesis ./internal/store
echo "bench: live projector at 2,000 events/s alone, beside a catch-up of another database, then during a catch-up of ${events} events in its scope, then on the backlog's own keys: whole pages, write slices at the default 20 ms budget and at 50 ms (issue 14, docs/live-writes.md)"
PROJECTION_BENCH_EVENTS="${events}" go test "${repeated[@]}" -bench LiveDuringCatchUp ./internal/reference/live
echo "bench: reconciliation's streamed detection of a clean scope (Provider.Open + DetectHistory), N and 4N = ${events} events (member over HTTP + PostgreSQL): peak heap, events/s, t(4N)/t(N)"
PROJECTION_BENCH_EVENTS="${events}" go test "${flags[@]}" -bench Detect_CleanScope ./internal/reconstore
echo "bench: live projector at 2,000 events/s during a catch-up of its scope (${events} events): interleaved rounds alone and beside a dry run of that scope paced at the manager share every 60 s (the goal), then with unpaced dry runs of it back to back and every 10 s, and of another database scope (the control)"
PROJECTION_BENCH_EVENTS="${events}" go test "${flags[@]}" -bench LiveBesideDryRuns ./internal/reconstore
echo "bench: controller (idle CURRENT scope; 100 and 1,000 scopes on one manager; three managers; NATS reconnect edge to CURRENT)"
go test "${flags[@]}" -bench . -skip EndToEnd ./controllers
echo "bench: end to end through the manager at N/4 and N = ${events} events against the store alone (${count}x)"
PROJECTION_BENCH_EVENTS="${events}" go test "${repeated[@]}" -bench EndToEnd ./controllers
}
run_all 2>&1 | tee "${out}"
echo
echo "bench: figures against their goals (issues 12 and 14, repairs item 3), this run"
go run ./hack/benchtable < "${out}"
