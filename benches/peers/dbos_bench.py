"""DBOS Transact (Python) on its SQLite system database: a 10-step no-op workflow.

Run by `dbos_compare.sh` inside the virtualenv it creates. The workflow is the same chain
as the Rust side's `Chain10`: step i receives step i-1's integer and returns it plus one,
each step a `@DBOS.step()` whose output DBOS checkpoints in `operation_outputs`.

Two phases on one fresh system database:

- sequential: N workflows, one after another, each called directly;
- concurrent: N workflows with C in flight: C Python threads, each calling the workflow
  function directly (DBOS runs synchronous workflows on the calling thread and writes its
  checkpoints through its SQLAlchemy connection pool).

For each phase it prints workflows/s and the p50/p99 latency of one workflow. At the end it
prints what reached the system database: rows per workflow in each table, and the write
statements and commits per workflow counted with SQLAlchemy engine events.

Usage: python dbos_bench.py --db PATH [--runs N] [--concurrency C] [--warmup W]
                            [--journal-mode default|wal]
Output: human-readable lines plus one final line `RESULT {json}` for the driver script.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa
from sqlalchemy import event

STEPS = 10


class Counters:
    """Write statements and commits that reach any SQLAlchemy engine (only DBOS's here)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inserts = 0
        self.updates = 0
        self.deletes = 0
        self.commits = 0
        self.enabled = False

    def snapshot(self) -> dict:
        with self.lock:
            return {
                "inserts": self.inserts,
                "updates": self.updates,
                "deletes": self.deletes,
                "commits": self.commits,
            }


COUNTERS = Counters()


@event.listens_for(sa.engine.Engine, "before_cursor_execute")
def _count_statement(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
    if not COUNTERS.enabled:
        return
    head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
    rows = len(parameters) if executemany and parameters else 1
    with COUNTERS.lock:
        if head == "INSERT":
            COUNTERS.inserts += rows
        elif head == "UPDATE":
            COUNTERS.updates += rows
        elif head == "DELETE":
            COUNTERS.deletes += rows


@event.listens_for(sa.engine.Engine, "commit")
def _count_commit(conn):  # noqa: ANN001
    if COUNTERS.enabled:
        with COUNTERS.lock:
            COUNTERS.commits += 1


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(round(q * len(sorted_values) + 0.5))))
    return sorted_values[rank - 1]


def phase(name: str, runs: int, concurrency: int, call) -> dict:  # noqa: ANN001
    latencies: list[float] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        started = time.perf_counter()
        value = call()
        elapsed = time.perf_counter() - started
        if value != STEPS:
            raise RuntimeError(f"workflow returned {value}, expected {STEPS}")
        with lock:
            latencies.append(elapsed)

    before = COUNTERS.snapshot()
    started = time.perf_counter()
    if concurrency <= 1:
        for i in range(runs):
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for future in [pool.submit(one, i) for i in range(runs)]:
                future.result()
    wall = time.perf_counter() - started
    after = COUNTERS.snapshot()
    delta = {k: (after[k] - before[k]) / runs for k in after}
    latencies.sort()
    result = {
        "phase": name,
        "runs": runs,
        "in_flight": concurrency,
        "seconds": wall,
        "workflows_per_s": runs / wall,
        "p50_ms": percentile(latencies, 0.50) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "mean_ms": statistics.fmean(latencies) * 1e3,
        "write_statements_per_run": delta["inserts"] + delta["updates"] + delta["deletes"],
        "commits_per_run": delta["commits"],
    }
    print(
        f"dbos {name:<10} runs={runs:<5} in_flight={concurrency:<3} "
        f"{result['workflows_per_s']:9.1f} workflows/s  p50 {result['p50_ms']:8.3f} ms  "
        f"p99 {result['p99_ms']:8.3f} ms  write statements/run "
        f"{result['write_statements_per_run']:.2f}  commits/run {result['commits_per_run']:.2f}",
        flush=True,
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="path of the SQLite system database")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--journal-mode",
        choices=["default", "wal"],
        default="default",
        help="default: leave DBOS's SQLite as DBOS opens it (rollback journal); "
        "wal: switch the file to WAL before DBOS opens it (WAL is persistent in the file)",
    )
    args = parser.parse_args()

    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(args.db + suffix)
        except FileNotFoundError:
            pass
    if args.journal_mode == "wal":
        with sqlite3.connect(args.db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")

    from dbos import DBOS, DBOSConfig  # imported late: the engine listeners are in place

    config: DBOSConfig = {
        "name": "dbos-bench",
        "system_database_url": f"sqlite:///{args.db}",
        "log_level": "WARNING",
        # Enough pooled connections for every thread in flight, plus DBOS's own.
        "sys_db_pool_size": max(20, args.concurrency + 8),
    }
    instance = DBOS(config=config)

    @DBOS.step()
    def step(x: int) -> int:
        return x + 1

    @DBOS.workflow()
    def chain10() -> int:
        x = 0
        for _ in range(STEPS):
            x = step(x)
        return x

    DBOS.launch()
    try:
        from importlib.metadata import version

        engine = instance._sys_db.engine  # DBOS's own engine, as it configured it
        with engine.connect() as conn:
            journal_mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            synchronous = conn.exec_driver_sql("PRAGMA synchronous").scalar()
            sqlite_version = conn.exec_driver_sql("SELECT sqlite_version()").scalar()
        sync_names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        print(
            f"dbos {version('dbos')} "
            f"python {sys.version.split()[0]} sqlite {sqlite_version}: "
            f"journal_mode={journal_mode} synchronous={sync_names.get(synchronous, synchronous)}",
            flush=True,
        )

        for _ in range(args.warmup):
            chain10()

        def table_counts() -> dict:
            with engine.connect() as conn:
                tables = [
                    row[0]
                    for row in conn.exec_driver_sql(
                        "SELECT name FROM sqlite_master WHERE type='table' "
                        "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                    )
                ]
                return {
                    t: conn.exec_driver_sql(f'SELECT COUNT(*) FROM "{t}"').scalar()
                    for t in tables
                }

        rows_before = table_counts()
        COUNTERS.enabled = True
        sequential = phase("sequential", args.runs, 1, chain10)
        concurrent = phase("concurrent", args.runs, args.concurrency, chain10)
        COUNTERS.enabled = False
        rows_after = table_counts()
        writes = COUNTERS.snapshot()
    finally:
        DBOS.destroy()

    total = 2 * args.runs
    rows = {t: (rows_after[t] - rows_before.get(t, 0)) / total for t in rows_after}
    rows = {t: v for t, v in rows.items() if v}
    per_workflow = {k: v / total for k, v in writes.items()}
    per_workflow["rows"] = sum(rows.values())
    per_workflow["write_statements"] = (
        per_workflow["inserts"] + per_workflow["updates"] + per_workflow["deletes"]
    )
    print(
        "dbos per workflow: rows "
        + ", ".join(f"{t} {v:g}" for t, v in rows.items())
        + f" (total {per_workflow['rows']:g}); write statements {per_workflow['write_statements']:g}"
        f" (INSERT {per_workflow['inserts']:g}, UPDATE {per_workflow['updates']:g},"
        f" DELETE {per_workflow['deletes']:g}); commits {per_workflow['commits']:g}",
        flush=True,
    )
    print(
        "RESULT "
        + json.dumps(
            {
                "journal_mode": journal_mode,
                "synchronous": sync_names.get(synchronous, synchronous),
                "sqlite_version": sqlite_version,
                "sequential": sequential,
                "concurrent": concurrent,
                "rows_per_workflow": rows,
                "per_workflow": per_workflow,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
