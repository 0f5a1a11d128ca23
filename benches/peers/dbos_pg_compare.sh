#!/usr/bin/env bash
# B5 on PostgreSQL: DBOS Transact for Python against this engine (PgStore) on the same
# PostgreSQL server, with the same 10-step no-op workflow, N times sequentially and N times
# with C in flight (BENCHMARKS.md, "Many workers on PostgreSQL"). Prints workflows/s, p50/p99
# latency, per-workflow writes and round trips, and the ratios (medians over REPEATS rounds).
#
#   benches/peers/dbos_pg_compare.sh                     # N=200, C=32, 3 rounds
#   RUNS=500 REPEATS=5 benches/peers/dbos_pg_compare.sh
#
# Settings (environment):
#   DATABASE_URL  the server (WORKFLOW_TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test);
#                 ours works in a fresh schema of that database, DBOS in its own database
#                 `dbos_bench_sys` on the same server (dropped and created each round)
#   RUNS          workflows per phase (200)
#   CONCURRENCY   workflows in flight in the concurrent phase (32)
#   WARMUP        untimed workflows before the phases (10)
#   REPEATS       rounds; every figure is the median over them (3)
#   DBOS_SPEC     what pip installs ("dbos")
#   PYTHON        the interpreter the virtualenv is made from (python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
DATABASE_URL="${DATABASE_URL:-${WORKFLOW_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}}"
RUNS="${RUNS:-200}"
CONCURRENCY="${CONCURRENCY:-32}"
WARMUP="${WARMUP:-10}"
REPEATS="${REPEATS:-3}"
DBOS_SPEC="${DBOS_SPEC:-dbos}"
PYTHON="${PYTHON:-python3}"

venv="$here/.venv"
data="$here/.data"
mkdir -p "$data"
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    "$PYTHON" -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import dbos" 2>/dev/null; then
    echo "== pip install $DBOS_SPEC"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$DBOS_SPEC"
fi
# DBOS's system database on the same server: the URL with another database name.
dbos_url="$(echo "$DATABASE_URL" | sed -E 's#^postgres(ql)?://#postgresql://#; s#/[^/?]*(\?.*)?$#/dbos_bench_sys#')"

echo "== machine"
echo "nproc: $(nproc)"
grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*:\s*/cpu: /' || true
uptime | sed 's/^.*load average/load average/'
echo "runs per phase: $RUNS, in flight: $CONCURRENCY, warm-up: $WARMUP, rounds: $REPEATS"

echo "== building the engine's side (cargo bench -p benches --bench postgres)"
(cd "$root" && cargo bench -p benches --bench postgres --no-run)

results="$data/pg_results.jsonl"
: >"$results"
for round in $(seq 1 "$REPEATS"); do
    echo "== round $round/$REPEATS: DBOS on PostgreSQL"
    "$venv/bin/python" "$here/dbos_pg_bench.py" --database-url "$dbos_url" \
        --runs "$RUNS" --concurrency "$CONCURRENCY" --warmup "$WARMUP" \
        | tee "$data/last.txt" | grep -v '^RESULT '
    sed -n 's/^RESULT /{"who": "dbos", "round": '"$round"', "result": /p' "$data/last.txt" \
        | sed 's/$/}/' >>"$results"
    echo "== round $round/$REPEATS: ours (PgStore)"
    (cd "$root" && WORKFLOW_TEST_DATABASE_URL="$DATABASE_URL" cargo bench -q -p benches \
        --bench postgres -- b5 --runs "$RUNS" --concurrency "$CONCURRENCY" --warmup "$WARMUP") \
        | tee "$data/last.txt" | grep -v '^RESULT '
    sed -n 's/^RESULT /{"who": "ours", "round": '"$round"', "result": /p' "$data/last.txt" \
        | sed 's/$/}/' >>"$results"
done

echo "== summary (median of $REPEATS rounds)"
"$venv/bin/python" - "$results" "$CONCURRENCY" <<'PY'
import json
import statistics
import sys

path, concurrency = sys.argv[1], int(sys.argv[2])
rows = [json.loads(line) for line in open(path) if line.strip()]
by_who: dict[str, list[dict]] = {}
for row in rows:
    by_who.setdefault(row["who"], []).append(row["result"])

def med(who: str, phase: str, key: str) -> float:
    return statistics.median(r[phase][key] for r in by_who[who])

labels = {"ours": "ours (PgStore)", "dbos": "DBOS Transact (PostgreSQL)"}
print(f"{'':28} {'phase':<11} {'workflows/s':>12} {'p50 ms':>9} {'p99 ms':>9}")
for who in by_who:
    for phase in ("sequential", "concurrent"):
        print(f"{labels[who]:28} {phase:<11} {med(who, phase, 'workflows_per_s'):12.1f} "
              f"{med(who, phase, 'p50_ms'):9.3f} {med(who, phase, 'p99_ms'):9.3f}")
print()
targets = {"sequential": 5.0, "concurrent": 10.0}
for phase in ("sequential", "concurrent"):
    ratio = med("ours", phase, "workflows_per_s") / med("dbos", phase, "workflows_per_s")
    target = targets[phase]
    print(f"ours / DBOS, {phase} ({'1' if phase == 'sequential' else concurrency} in flight): "
          f"{ratio:.1f}x (target >= {target:g}x: {'met' if ratio >= target else 'NOT met'})")
print()
for phase in ("sequential", "concurrent"):
    print(f"ours, {phase}: {med('ours', phase, 'journal_writes_per_run'):g} journal entries, "
          f"{med('ours', phase, 'commits_per_run'):g} commits, "
          f"{med('ours', phase, 'round_trips_per_run'):.2f} round trips per workflow "
          f"({med('ours', phase, 'round_trips_per_run') / 10:.2f} per step)")
raw = statistics.median(r["raw_commit_ms"] for r in by_who["ours"])
seq_rt = med("ours", "sequential", "p50_ms") / med("ours", "sequential", "round_trips_per_run")
print(f"server floor in the same rounds: one autocommit insert {raw:.3} ms (median); ours "
      f"sequential: {seq_rt:.3} ms per round trip ({seq_rt / raw:.2}x the floor)")
r = by_who["dbos"][0]
per = {k: statistics.median(x["per_workflow"][k] for x in by_who["dbos"]) for k in r["per_workflow"]}
tables = ", ".join(f"{t} {v:g}" for t, v in r["rows_per_workflow"].items())
print(f"DBOS: {per['rows']:g} rows ({tables}); {per['write_statements']:g} write statements; "
      f"{per['commits']:.2f} commits per workflow")
PY
