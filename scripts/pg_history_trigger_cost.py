#!/usr/bin/env python3
"""What the PostgreSQL history triggers cost the server, per row written to tx.

Starts a throwaway PostgreSQL cluster (initdb in a temp folder, as the postgres user when run
as root; fsync on, synchronous_commit on, autovacuum off so that no worker's CPU is counted),
and for each variant of the ledger schema — no history trigger, the row trigger of schema
version 3 (its migration steps 1 to 3, crates/ledger/src/postgres/migrations/), the statement
triggers of version 4 (schema.postgres.sql) — in a fresh database, runs pgbench with two
workloads:

  single: INSERT … VALUES (one row) ON CONFLICT (guid) DO NOTHING, each its own commit;
  batch:  INSERT … SELECT … FROM unnest(100 GUIDs) ON CONFLICT (guid) DO NOTHING RETURNING
          guid, each its own commit.

The server's CPU is the postmaster's own and its reaped children's (utime, stime, cutime,
cstime from /proc) plus its live children's, before and after each run; divided by the rows
the run inserted. History's cost is a variant's figure minus that of the variant without a
trigger. Each cell is run --repeat times, the variants in turn; the median is printed.

A second figure, free of the other processes on the machine: the time EXPLAIN ANALYZE reports
for the history trigger itself (its "Trigger …: time=" line), over --explain statements of
each workload in one session after one to warm up, per row. It leaves out what the trigger
costs outside its own call: queuing the rows for it, and the commit's larger WAL flush.

  python3 scripts/pg_history_trigger_cost.py [--clients 8] [--single-tx 2000]
      [--batch-tx 300] [--repeat 3] [--explain 200]
"""

import argparse
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = int(os.environ.get("PG_COST_PORT", "55499"))
TICK = os.sysconf("SC_CLK_TCK")

SINGLE = """\\set n random(1, 9000000000000000)
INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel)
VALUES ('S-' || :n, 'TRNF', 'SENT', '\\x00', 1, now(), 'atm-1') ON CONFLICT (guid) DO NOTHING;
"""

BATCH = """\\set n random(1, 9000000000000000)
INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel)
SELECT v.guid, 'TRNF', 'SENT', '\\x00', 1, now(), 'atm-1'
FROM unnest(ARRAY(SELECT 'B-' || :n || '-' || i FROM generate_series(1, 100) i)) AS v(guid)
ON CONFLICT (guid) DO NOTHING RETURNING guid;
"""

NO_TRIGGER = """
DROP TRIGGER tx_history_on_insert ON tx;
DROP TRIGGER tx_history_on_update ON tx;
DROP TRIGGER tx_history_on_delete ON tx;
"""


def as_postgres(cmd):
    return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def cpu_ticks(postmaster):
    """The cluster's CPU so far: the postmaster with its reaped children, and the live ones."""
    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()

    s = stat(postmaster)
    total = sum(int(x) for x in s[11:15])  # utime stime cutime cstime
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == postmaster:
            continue
        try:
            c = stat(pid)
        except OSError:
            continue
        if int(c[1]) == postmaster:
            total += int(c[11]) + int(c[12])
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--single-tx", type=int, default=2000, help="per client")
    ap.add_argument("--batch-tx", type=int, default=300, help="per client")
    ap.add_argument("--explain", type=int, default=200, help="statements per workload")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="txrelay-pgcost")
    data, sock = os.path.join(tmp, "data"), os.path.join(tmp, "sock")
    os.mkdir(sock)
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        for p in (tmp, sock):
            os.chown(p, pg.pw_uid, pg.pw_gid)
    psql = [f"{BIN}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", sock, "-p", str(PORT),
            "-U", "postgres"]
    try:
        run(as_postgres([f"{BIN}/initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8",
                         "--no-sync", "-D", data]))
        opts = (f"-p {PORT} -k {sock} -c listen_addresses='' -c fsync=on "
                "-c synchronous_commit=on -c autovacuum=off -c max_connections=100")
        run(as_postgres([f"{BIN}/pg_ctl", "start", "-w", "-D", data, "-l",
                         os.path.join(tmp, "log"), "-o", opts]))
        with open(os.path.join(data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        scripts = {}
        for name, text in (("single", SINGLE), ("batch", BATCH)):
            scripts[name] = os.path.join(tmp, name + ".sql")
            with open(scripts[name], "w") as f:
                f.write(text)
            os.chmod(scripts[name], 0o644)
        # The schema of version 3: its migration steps, in order.
        v3 = os.path.join(tmp, "schema.v3.sql")
        with open(v3, "w") as f:
            for step in (1, 2, 3):
                path = os.path.join(ROOT, f"crates/ledger/src/postgres/migrations/v{step}.sql")
                with open(path) as step_file:
                    f.write(step_file.read() + "\n")
        os.chmod(v3, 0o644)
        v4 = os.path.join(ROOT, "schema.postgres.sql")
        variants = [("none", v4, NO_TRIGGER), ("row (v3)", v3, ""), ("statement (v4)", v4, "")]
        tx = {"single": a.single_tx, "batch": a.batch_tx}
        results = {}  # (workload, variant) -> [(us per row, rows per s)]
        for rep in range(a.repeat):
            for work in ("single", "batch"):
                for i, (variant, schema, extra) in enumerate(variants):
                    db = f"cost_{i}"
                    run(psql + ["-c", f"DROP DATABASE IF EXISTS {db}"])
                    run(psql + ["-c", f"CREATE DATABASE {db}"])
                    run(psql + ["-d", db, "-f", schema])
                    if extra:
                        run(psql + ["-d", db, "-c", extra])
                    run(psql + ["-d", db, "-c", "CHECKPOINT"])
                    time.sleep(0.3)  # the set-up sessions exit and are reaped
                    before, t0 = cpu_ticks(postmaster), time.monotonic()
                    run([f"{BIN}/pgbench", "-n", "-h", sock, "-p", str(PORT), "-U", "postgres",
                         "-c", str(a.clients), "-j", "2", "-t", str(tx[work]),
                         "-f", scripts[work], db])
                    wall = time.monotonic() - t0
                    time.sleep(0.3)  # the backends exit and are reaped
                    ticks = cpu_ticks(postmaster) - before
                    rows = int(run(psql + ["-d", db, "-t", "-A", "-c",
                                           "SELECT count(*) FROM tx"]).stdout)
                    hist = int(run(psql + ["-d", db, "-t", "-A", "-c",
                                           "SELECT count(*) FROM tx_history"]).stdout)
                    want = 0 if variant == "none" else rows
                    assert hist == want, f"{variant}: {hist} history rows for {rows} rows"
                    us = ticks / TICK / rows * 1e6
                    results.setdefault((work, variant), []).append((us, rows / wall))
                    print(f"rep {rep + 1} {work:6} {variant:15} rows {rows:7} "
                          f"server {us:6.1f} us/row  {rows / wall:8.0f} rows/s", file=sys.stderr)
                    run(psql + ["-c", f"DROP DATABASE {db}"])
        trigger_us = {}  # (workload, variant) -> µs per row
        for work in ("single", "batch"):
            stmt = "".join(l for l in open(scripts[work]) if not l.startswith("\\set"))
            for i, (variant, schema, extra) in enumerate(variants[1:], start=1):
                db = f"explain_{i}"
                run(psql + ["-c", f"CREATE DATABASE {db}"])
                run(psql + ["-d", db, "-f", schema])
                sql = os.path.join(tmp, "explain.sql")
                with open(sql, "w") as f:
                    for k in range(a.explain + 1):
                        f.write("EXPLAIN ANALYZE " + stmt.replace(":n", str(k + 1)))
                out = run(psql + ["-d", db, "-f", sql]).stdout
                lines = [l for l in out.splitlines() if l.strip().startswith("Trigger tx_history")]
                times = [float(l.split("time=")[1].split()[0]) for l in lines[1:]]
                rows = a.explain * (1 if work == "single" else 100)
                trigger_us[(work, variant)] = sum(times) * 1000 / rows
                run(psql + ["-c", f"DROP DATABASE {db}"])
        print(f"clients {a.clients}, single {a.single_tx} tx/client, batch {a.batch_tx} "
              f"tx/client x 100 rows, median of {a.repeat}")
        print("| workload | history | server CPU µs/row | history's cost µs/row "
              "| trigger's own time µs/row | rows/s |")
        print("|---|---|---|---|---|---|")
        for work in ("single", "batch"):
            base = statistics.median(u for u, _ in results[(work, "none")])
            for variant, _, _ in variants:
                us = statistics.median(u for u, _ in results[(work, variant)])
                rate = statistics.median(r for _, r in results[(work, variant)])
                cost = "–" if variant == "none" else f"{us - base:.1f}"
                own = trigger_us.get((work, variant))
                own = "–" if own is None else f"{own:.1f}"
                print(f"| {work} | {variant} | {us:.1f} | {cost} | {own} | {rate:.0f} |")
    finally:
        subprocess.run(as_postgres([f"{BIN}/pg_ctl", "stop", "-m", "fast", "-w", "-D", data]),
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
