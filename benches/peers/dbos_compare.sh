#!/usr/bin/env bash
# End-to-end durable comparison with DBOS Transact for Python on SQLite (BENCHMARKS.md,
# "Peers"). A 10-step no-op workflow, N times sequentially and N times with C in flight,
# on DBOS (its SQLite system database) and on this engine (SqliteStore), both with
# synchronous=FULL. Prints workflows/s, p50/p99 latency, journal writes per workflow and
# the ratios (medians over REPEATS rounds).
#
#   benches/peers/dbos_compare.sh                      # N=200, C=32, 3 rounds
#   RUNS=500 CONCURRENCY=32 REPEATS=5 benches/peers/dbos_compare.sh
#
# Settings (environment):
#   RUNS         workflows per phase (200)
#   CONCURRENCY  workflows in flight in the concurrent phase (32)
#   WARMUP       untimed workflows before the phases (10)
#   REPEATS      rounds; every figure is the median over them (3)
#   DBOS_MODES   DBOS journal modes to run: "default" (DBOS as it ships: SQLite's rollback
#                journal) and/or "wal" (the file switched to WAL first, as ours) ("default wal")
#   DBOS_SPEC    what pip installs ("dbos")
#   PYTHON       the interpreter the virtualenv is made from (python3)
#
# The virtualenv lives in benches/peers/.venv and the databases in benches/peers/.data
# (both gitignored). Needs network access to PyPI the first time only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
RUNS="${RUNS:-200}"
CONCURRENCY="${CONCURRENCY:-32}"
WARMUP="${WARMUP:-10}"
REPEATS="${REPEATS:-3}"
DBOS_MODES="${DBOS_MODES:-default wal}"
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

echo "== machine"
echo "nproc: $(nproc)"
grep -m1 'model name' /proc/cpuinfo | sed 's/^model name\s*:\s*/cpu: /' || true
df -hT "$data" | tail -n 1 | awk '{print "disk: " $1 " (" $2 ", " $3 ") mounted on " $7}'
uptime | sed 's/^.*load average/load average/'
"$venv/bin/python" - <<'EOF'
import sys
from importlib.metadata import version
print(f"python {sys.version.split()[0]}, dbos {version('dbos')}, sqlalchemy {version('sqlalchemy')}")
EOF
echo "runs per phase: $RUNS, in flight: $CONCURRENCY, warm-up: $WARMUP, rounds: $REPEATS"

echo "== building the engine's side (cargo bench -p benches --bench peers_dbos)"
(cd "$root" && cargo bench -p benches --bench peers_dbos --no-run)

results="$data/results.jsonl"
: >"$results"
for round in $(seq 1 "$REPEATS"); do
    for mode in $DBOS_MODES; do
        echo "== round $round/$REPEATS: DBOS ($mode journal mode)"
        "$venv/bin/python" "$here/dbos_bench.py" --db "$data/dbos_$mode.sqlite" \
            --runs "$RUNS" --concurrency "$CONCURRENCY" --warmup "$WARMUP" \
            --journal-mode "$mode" | tee "$data/last.txt" | grep -v '^RESULT '
        sed -n 's/^RESULT /{"who": "dbos_'"$mode"'", "round": '"$round"', "result": /p' \
            "$data/last.txt" | sed 's/$/}/' >>"$results"
    done
    echo "== round $round/$REPEATS: ours (SqliteStore, synchronous=FULL)"
    (cd "$root" && cargo bench -q -p benches --bench peers_dbos -- --db "$data/ours.sqlite" \
        --runs "$RUNS" --concurrency "$CONCURRENCY" --warmup "$WARMUP" --synchronous full) \
        | tee "$data/last.txt" | grep -v '^RESULT '
    sed -n 's/^RESULT /{"who": "ours", "round": '"$round"', "result": /p' "$data/last.txt" \
        | sed 's/$/}/' >>"$results"
done

echo "== summary (median of $REPEATS rounds)"
"$venv/bin/python" - "$results" "$RUNS" "$CONCURRENCY" <<'EOF'
import json
import statistics
import sys

path, runs, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(path) if line.strip()]
by_who: dict[str, list[dict]] = {}
for row in rows:
    by_who.setdefault(row["who"], []).append(row["result"])

def med(who: str, phase: str, key: str) -> float:
    return statistics.median(r[phase][key] for r in by_who[who])

labels = {
    "ours": "ours (SqliteStore, WAL, synchronous=FULL)",
    "dbos_default": "DBOS (rollback journal, synchronous=FULL)",
    "dbos_wal": "DBOS (WAL, synchronous=FULL)",
}
for who, results in by_who.items():
    first = results[0]
    if who.startswith("dbos"):
        print(f"{labels.get(who, who)}: journal_mode={first['journal_mode']} "
              f"synchronous={first['synchronous']} sqlite {first['sqlite_version']}")
print()
print(f"{'':46} {'phase':<11} {'workflows/s':>12} {'p50 ms':>9} {'p99 ms':>9}")
for who in by_who:
    for phase in ("sequential", "concurrent"):
        print(f"{labels.get(who, who):46} {phase:<11} {med(who, phase, 'workflows_per_s'):12.1f} "
              f"{med(who, phase, 'p50_ms'):9.3f} {med(who, phase, 'p99_ms'):9.3f}")

print()
targets = {"sequential": 10.0, "concurrent": 100.0}
if "ours" in by_who:
    for who in (w for w in by_who if w.startswith("dbos")):
        for phase in ("sequential", "concurrent"):
            ratio = med("ours", phase, "workflows_per_s") / med(who, phase, "workflows_per_s")
            p50 = med(who, phase, "p50_ms") / med("ours", phase, "p50_ms")
            target = targets[phase]
            verdict = "met" if ratio >= target else "NOT met"
            print(f"ours / {labels[who]}, {phase} ({'1' if phase == 'sequential' else concurrency} in flight): "
                  f"throughput {ratio:.1f}x (target >= {target:g}x: {verdict}), p50 latency {p50:.1f}x lower")

print()
steps = 10
print(f"journal commits per workflow (target <= steps + 2 = {steps + 2}; in flight, "
      f"several workflows share a commit):")
if "ours" in by_who:
    for phase in ("sequential", "concurrent"):
        w = med("ours", phase, "journal_writes_per_run")
        c = med("ours", phase, "commits_per_run")
        print(f"  ours, {phase}: {w:g} journal entries (RunStarted + AttemptStarted and "
              f"StepSucceeded per step), {c:.2f} commits per workflow "
              f"({'met' if c <= steps + 2 else 'NOT met'})")
for who in (w for w in by_who if w.startswith("dbos")):
    r = by_who[who][0]
    per = {k: statistics.median(x["per_workflow"][k] for x in by_who[who]) for k in r["per_workflow"]}
    tables = ", ".join(f"{t} {v:g}" for t, v in r["rows_per_workflow"].items())
    print(f"  {labels[who]}: {per['rows']:g} rows ({tables}); {per['write_statements']:g} write "
          f"statements (INSERT {per['inserts']:g}, UPDATE {per['updates']:g}); {per['commits']:.2f} "
          f"commits per workflow overall ({'met' if per['commits'] <= steps + 2 else 'NOT met'})")
    for phase in ("sequential", "concurrent"):
        print(f"    {phase}: {med(who, phase, 'commits_per_run'):.2f} commits per workflow")
EOF
