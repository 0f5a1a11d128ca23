#!/usr/bin/env bash
# B19: DBOS Transact for Rust (crate `dbos`, default configuration) against this engine
# (PgStore) on the same PostgreSQL server, with the same ten-step no-op chain, sequentially
# and with C in flight, rounds alternating between the two (BENCHMARKS.md, "B19"). Prints
# each round, then the medians, the ratios and the floor (11 x the server's autocommit
# insert, measured in our rounds).
#
#   benches/peers/dbos_rust_compare.sh                 # N=1000, C=32, 3 rounds
#   RUNS=500 REPEATS=5 benches/peers/dbos_rust_compare.sh
#
# Settings (environment):
#   DATABASE_URL  the server's default database (WORKFLOW_TEST_DATABASE_URL, else
#                 postgres://postgres@127.0.0.1:5432/test): the floor is measured there and
#                 the statistics read from there; each side runs in a database of its own
#                 on the same server (wf_b19, dbos_b19: dropped and created each round), so
#                 `xact_commit` counts its commits alone
#   RUNS          workflows per phase (1000)
#   CONCURRENCY   workflows in flight in the concurrent phase (32)
#   WARMUP        untimed workflows before each phase, on another instance (20)
#   REPEATS       rounds; every figure is the median over them (3)
#
# DBOS's side is its own cargo project (benches/peers/dbos-rust, outside the workspace,
# with its own target directory), built here in release mode.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
DATABASE_URL="${DATABASE_URL:-${WORKFLOW_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}}"
RUNS="${RUNS:-1000}"
CONCURRENCY="${CONCURRENCY:-32}"
WARMUP="${WARMUP:-20}"
REPEATS="${REPEATS:-3}"

base="${DATABASE_URL%/*}"
ours_url="$base/wf_b19"
dbos_url="$base/dbos_b19"
data="$here/.data"
mkdir -p "$data"

echo "== machine"
echo "nproc: $(nproc)"
grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*:\s*/cpu: /' || true
uptime | sed 's/^.*load average/load average/'
psql "$DATABASE_URL" -XAtc "SELECT 'server: ' || version() || ', synchronous_commit=' || current_setting('synchronous_commit')"
echo "runs per phase: $RUNS, in flight: $CONCURRENCY, warm-up: $WARMUP, rounds: $REPEATS"

echo "== building DBOS's side (benches/peers/dbos-rust, release)"
(cd "$here/dbos-rust" && CARGO_TARGET_DIR="$here/dbos-rust/target" cargo build --release --quiet)
grep -A1 '^name = "dbos"$' "$here/dbos-rust/Cargo.lock" | sed -n 's/^version = "\(.*\)"/dbos crate: \1/p'
echo "== building ours (cargo bench -p benches --bench postgres)"
(cd "$root" && cargo bench -p benches --bench postgres --no-run --quiet)

fresh() {
    psql "$DATABASE_URL" -Xqc "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}

results="$data/b19_results.jsonl"
: >"$results"
for round in $(seq 1 "$REPEATS"); do
    echo "== round $round/$REPEATS: DBOS Transact for Rust"
    fresh dbos_b19
    "$here/dbos-rust/target/release/dbos-rust-peer" --database-url "$dbos_url" \
        --stats-url "$DATABASE_URL" --runs "$RUNS" --concurrency "$CONCURRENCY" \
        --warmup "$WARMUP" | tee "$data/last.txt" | grep -v '^RESULT '
    sed -n 's/^RESULT /{"who": "dbos", "round": '"$round"', "result": /p' "$data/last.txt" \
        | sed 's/$/}/' >>"$results"
    echo "== round $round/$REPEATS: ours (PgStore)"
    fresh wf_b19
    (cd "$root" && WORKFLOW_TEST_DATABASE_URL="$DATABASE_URL" cargo bench -q -p benches \
        --bench postgres -- b19 --database-url "$ours_url" --runs "$RUNS" \
        --concurrency "$CONCURRENCY" --warmup "$WARMUP") \
        | tee "$data/last.txt" | grep -v '^RESULT '
    sed -n 's/^RESULT /{"who": "ours", "round": '"$round"', "result": /p' "$data/last.txt" \
        | sed 's/$/}/' >>"$results"
done
psql "$DATABASE_URL" -Xqc "DROP DATABASE IF EXISTS dbos_b19 WITH (FORCE)" -c "DROP DATABASE IF EXISTS wf_b19 WITH (FORCE)"

echo "== summary (median of $REPEATS rounds)"
python3 - "$results" "$CONCURRENCY" <<'PY'
import json
import statistics
import sys

path, concurrency = sys.argv[1], int(sys.argv[2])
rows = [json.loads(line) for line in open(path) if line.strip()]
by = {}
for row in rows:
    by.setdefault(row["who"], []).append(row["result"])

def med(who, phase, key):
    return statistics.median(r[phase][key] for r in by[who])

labels = {"ours": "ours (PgStore)", "dbos": "DBOS Transact for Rust"}
print(f"| side | phase | workflows/s | p50 ms | p99 ms | commits/workflow | round trips/workflow |")
print(f"| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for who in ("dbos", "ours"):
    for phase in ("sequential", "concurrent"):
        print(f"| {labels[who]} | {phase} | {med(who, phase, 'workflows_per_s'):.0f} | "
              f"{med(who, phase, 'p50_ms'):.2f} | {med(who, phase, 'p99_ms'):.2f} | "
              f"{med(who, phase, 'commits_per_run'):.2f} | {med(who, phase, 'round_trips_per_run'):.2f} |")
print()
for phase, target in (("sequential", 2.0), ("concurrent", 3.0)):
    ratios = [o[phase]["workflows_per_s"] / d[phase]["workflows_per_s"] for o, d in zip(by["ours"], by["dbos"])]
    ratio = statistics.median(ratios)
    print(f"ours / DBOS, {phase} ({'1' if phase == 'sequential' else concurrency} in flight): "
          f"{ratio:.2f}x, rounds {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(target >= {target:g}x: {'met' if ratio >= target else 'NOT met'})")
floors = [11 * r["raw_commit_ms"] for r in by["ours"]]
shares = [f / (1e3 / r["sequential"]["workflows_per_s"]) for f, r in zip(floors, by["ours"])]
print(f"floor: 11 x the server's autocommit insert = {statistics.median(floors):.3f} ms "
      f"({statistics.median(r['raw_commit_ms'] for r in by['ours']):.3f} ms each); ours sequential: "
      f"{1e3 / med('ours', 'sequential', 'workflows_per_s'):.3f} ms per workflow = "
      f"{statistics.median(shares):.2f}x the floor's rate "
      f"(target >= 0.8x: {'met' if statistics.median(shares) >= 0.8 else 'NOT met'})")
PY
