"""DBOS Transact (Python) on a PostgreSQL system database: a 10-step no-op workflow.

Run by `dbos_pg_compare.sh` inside the virtualenv it creates, on the same server and
workflow shape as the engine's side (`cargo bench -p benches --bench postgres -- b5`): step
i receives step i-1's integer and returns it plus one, each a `@DBOS.step()` whose output
DBOS checkpoints in its system database.

Two phases on one fresh system database (dropped and created by DBOS at launch):
sequential (N workflows one after another) and concurrent (N workflows, C threads each
calling the workflow function). It prints workflows/s, p50/p99 latency, and the rows,
write statements and commits per workflow that reached the system database (counted with
SQLAlchemy engine events, as `dbos_bench.py` does on SQLite).

Usage: python dbos_pg_bench.py --database-url postgresql://user@host:5432/dbname
                               [--runs N] [--concurrency C] [--warmup W]
Output: human-readable lines plus one final line `RESULT {json}` for the driver script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import sqlalchemy as sa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dbos_bench import COUNTERS, STEPS, phase  # noqa: E402  (also installs the counters)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="the system database (recreated)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    url = sa.engine.make_url(args.database_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')
    admin.dispose()

    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {
        "name": "dbos-pg-bench",
        "system_database_url": args.database_url,
        "log_level": "WARNING",
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
            server = conn.exec_driver_sql("SHOW server_version").scalar()
            sync_commit = conn.exec_driver_sql("SHOW synchronous_commit").scalar()
        print(
            f"dbos {version('dbos')} python {sys.version.split()[0]} on PostgreSQL {server} "
            f"(synchronous_commit={sync_commit})",
            flush=True,
        )
        for _ in range(args.warmup):
            chain10()

        def table_counts() -> dict:
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT schemaname || '.' || relname FROM pg_stat_user_tables ORDER BY 1"
                ).fetchall()
                return {
                    t: conn.exec_driver_sql(f"SELECT COUNT(*) FROM {t}").scalar()
                    for (t,) in rows
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
        + f" (total {per_workflow['rows']:g}); write statements {per_workflow['write_statements']:g};"
        f" commits {per_workflow['commits']:g}",
        flush=True,
    )
    print(
        "RESULT "
        + json.dumps(
            {
                "server": server,
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
