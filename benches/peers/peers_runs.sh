#!/usr/bin/env bash
# Runs the in-memory peers benchmark (benches/benches/peers.rs: the engine next to dagrs,
# dagx and hand-written tokio) REPEATS times and prints, for every point, the median over
# the runs of criterion's median (`median.point_estimate` in
# target/criterion/<group>/<variant>/<n>/new/estimates.json), with the ratios of every
# peer to the engine.
#
#   benches/peers/peers_runs.sh                 # 3 runs, --warm-up-time 1 --measurement-time 3
#   REPEATS=5 benches/peers/peers_runs.sh
#   REPEATS=1 CRITERION_ARGS="--warm-up-time 0.5 --measurement-time 1" benches/peers/peers_runs.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
REPEATS="${REPEATS:-3}"
CRITERION_ARGS="${CRITERION_ARGS:---warm-up-time 1 --measurement-time 3}"
PYTHON="${PYTHON:-python3}"
data="$here/.data"
mkdir -p "$data"
medians="$data/peers_medians.jsonl"
: >"$medians"

echo "nproc: $(nproc); $(uptime | sed 's/^.*load average/load average/')"
cd "$root"
cargo bench -p benches --features peers --bench peers --no-run
for run in $(seq 1 "$REPEATS"); do
    echo "== run $run/$REPEATS: cargo bench -p benches --features peers --bench peers -- $CRITERION_ARGS"
    # shellcheck disable=SC2086
    cargo bench -q -p benches --features peers --bench peers -- $CRITERION_ARGS --noplot 2>&1 \
        | grep -E '^peers|time:' || true
    "$PYTHON" - "$root/target/criterion" "$run" >>"$medians" <<'EOF'
import glob
import json
import os
import sys

base, run = sys.argv[1], int(sys.argv[2])
for path in sorted(glob.glob(os.path.join(base, "peers_*", "*", "*", "new", "estimates.json"))):
    group, variant, n = path[len(base) + 1:].split(os.sep)[:3]
    with open(path) as f:
        median = json.load(f)["median"]["point_estimate"]
    print(json.dumps({"run": run, "group": group, "variant": variant, "n": int(n), "ns": median}))
EOF
    echo "load after run $run: $(uptime | sed 's/^.*load average: //')"
done

echo "== medians over $REPEATS run(s) of criterion's median; (ratio) = median of the per-run peer / engine"
"$PYTHON" - "$medians" <<'EOF'
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
points: dict = {}
for row in rows:
    points.setdefault((row["group"], row["n"]), {}).setdefault(row["variant"], []).append(row["ns"])

def fmt(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"

order = ["engine", "dagrs", "dagrs_build", "dagx", "dagx_build", "tokio_spawn", "tokio_joinset"]
group_order = ["peers_chain", "peers_fan_out", "peers_chain_mt", "peers_fan_out_mt"]
for (group, n) in sorted(points, key=lambda k: (group_order.index(k[0]) if k[0] in group_order else 9, k[1])):
    variants = points[(group, n)]
    med = {v: statistics.median(xs) for v, xs in variants.items()}
    engine = variants.get("engine")
    cells = []
    for v in order:
        if v in med:
            ratio = ""
            if engine and v != "engine" and len(engine) == len(variants[v]):
                # The median of the per-run ratios: steadier than a ratio of medians.
                ratios = [x / e for x, e in zip(variants[v], engine)]
                ratio = f" ({statistics.median(ratios):.2f}x)"
            cells.append(f"{v} {fmt(med[v])}{ratio}")
    print(f"{group}/{n}: " + "; ".join(cells))
EOF
