#!/usr/bin/env python3
"""What the SQLite history triggers cost the writer, without the relay: transfers (claim INSERT
+ result UPDATE, --batch per transaction as the group commit makes them, WAL, synchronous FULL
unless --sync OFF) on the previous schema (version 6, from the ledger's migration steps)
without its tx triggers, as it was, with each element of its history changed alone, and on
schema.sql as it is. Prints microseconds per transfer, the least of --rounds (the machine's
noise only adds), and the median, and the pages each transfer writes to the WAL (frames;
checkpoints run every 16 transactions, PASSIVE, timed as SQLite's automatic ones would be).

--guids says which GUIDs the transfers carry: sorted (each transaction's GUIDs next to each
other, and after the previous transaction's: every index entry lands on the same leaf page),
streams (the bench's loadgen: 64 connections, each counting up, `bench-CONN-N`: a
transaction's 32 GUIDs land on as many leaf pages of each GUID index), random (UUIDv4-like,
as a bank's channels send them: a leaf page at a random place of a growing index).

The elements: noauto (INTEGER PRIMARY KEY without AUTOINCREMENT: no sqlite_sequence update
per row), noat (no tx_history_at index), noguid (no tx_history_guid index: the insert
trigger's replaced-row probe then scans the history; timed only when named in --only), guidonly (the guid index on (guid)
alone), oneactor (one tx_actor lookup per history row, not two), noprobe (no replaced-row
probe), noautonoat (noauto and noat together), atconst (a constant `at` instead of strftime, to bound what the clock costs),
and newnoguid (version 7 without its GUID index and the insert trigger's probe that needs it:
the bound of what taking that index off the write path could buy).

Then purge's history deletion (crates/ledger/src/writes/purge_history_chunk.rs) on a
history of --purge-rows rows, all old and of GUIDs no longer in the ledger, with and without
the at index: milliseconds per chunk of 10,000 and for the last chunk (nothing left to find).

Usage: python3 scripts/history_trigger_cost.py [--rounds N] [--transfers N] [--batch N]
       [--sync FULL|OFF] [--guids sorted|streams|random] [--purge-rows N] [--only v6,new,...]"""
import argparse, os, random, re, shutil, sqlite3, statistics, tempfile, time, uuid
parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument('--rounds', type=int, default=3, help='how many times each variant is timed (default 3)')
parser.add_argument('--transfers', type=int, default=20000, help='transfers per timing (default 20000)')
parser.add_argument('--batch', type=int, default=32, help='claims (then results) per transaction (default 32)')
parser.add_argument('--sync', default='FULL', choices=('FULL', 'OFF'))
parser.add_argument('--guids', default='sorted', choices=('sorted', 'streams', 'random'), help='the GUIDs\' order (default sorted)')
parser.add_argument('--purge-rows', type=int, default=1000000, help='history rows for the purge timing (0: skip)')
parser.add_argument('--only', default='', help='comma-separated variants to time (default all)')
args = parser.parse_args()
if args.rounds < 1 or args.transfers < args.batch or args.batch < 1:
    parser.error('--rounds, --batch must be at least 1, --transfers at least --batch')
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')


def schema_at(version):
    """The SQLite schema of `version` from the ledger's migration steps, as sqlite/migrations.rs
    runs them (crates/ledger/src/sqlite/migrations/vN.sql; version 6 first adds the channel
    columns, which SQL cannot do harmlessly and Rust does there)."""
    steps = []
    for v in range(1, version + 1):
        if v == 6:
            steps.append('ALTER TABLE tx ADD COLUMN channel TEXT;\n'
                         'ALTER TABLE tx_history ADD COLUMN channel TEXT;\n')
        steps.append(open(os.path.join(root, f'crates/ledger/src/sqlite/migrations/v{v}.sql')).read())
    return '\n'.join(steps)


v6 = schema_at(6)
new = open(os.path.join(root, 'schema.sql')).read()
AT_INDEX = 'CREATE INDEX IF NOT EXISTS tx_history_at ON tx_history (at);'
GUID_INDEX = 'CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid, id);'
TWO_ACTORS = re.compile(r"VALUES \(([^;]*?),\s*coalesce\(\(SELECT who FROM tx_actor ORDER BY rowid DESC LIMIT 1\), 'sql'\),\s*"
                        r"\(SELECT reason FROM tx_actor ORDER BY rowid DESC LIMIT 1\), (\w+\.channel)\);", re.S)
ONE_ACTOR = (r"SELECT \1, coalesce(a.who, 'sql'), a.reason, \2 "
             r"FROM (SELECT max(rowid) AS r FROM tx_actor) m LEFT JOIN tx_actor a ON a.rowid = m.r;")
PROBE = re.compile(r"(CREATE TRIGGER tx_history_on_insert AFTER INSERT ON tx BEGIN\n).*?AND h.to_state IS NOT NULL;\n", re.S)
VARIANTS = {
    'none': v6, 'v6': v6,
    'noauto': v6.replace('INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY'),
    'noat': v6.replace(AT_INDEX, ''),
    'noguid': v6.replace(GUID_INDEX, ''),
    'guidonly': v6.replace(GUID_INDEX, 'CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid);'),
    'oneactor': TWO_ACTORS.sub(ONE_ACTOR, v6),
    'noprobe': PROBE.sub(r'\1', v6),
    'atconst': v6.replace("DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))", "DEFAULT ('2026-01-01 00:00:00.000')"),
    'noautonoat': v6.replace('INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY').replace(AT_INDEX, ''),
    'new': new,
    'newnoguid': PROBE.sub(r'\1', new).replace(GUID_INDEX, ''),
}
for k, s in VARIANTS.items():
    assert k in ('none', 'v6', 'new') or s not in (v6, new), f'variant {k} changed nothing (schema text moved?)'
tmp = tempfile.mkdtemp()

def fresh(name, schema):
    p = os.path.join(tmp, f'{name}.db')
    for s in ('', '-wal', '-shm'):
        try: os.remove(p + s)
        except FileNotFoundError: pass
    c = sqlite3.connect(p, isolation_level=None)
    c.execute('PRAGMA journal_mode=WAL'); c.execute(f'PRAGMA synchronous={args.sync}')
    c.executescript(schema)
    return c

def run(variant):
    c = fresh(variant, VARIANTS[variant])
    if variant == 'none':
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='tx'").fetchall():
            c.execute(f'DROP TRIGGER {t}')
    c.execute('PRAGMA wal_autocheckpoint=0')
    batches = args.transfers // args.batch
    frames = 0
    def batch(stmt):
        c.execute('BEGIN IMMEDIATE'); c.execute("INSERT INTO tx_actor (who) VALUES ('relay')")
        r = c.execute('SELECT last_insert_rowid()').fetchone()[0]
        stmt()
        c.execute('DELETE FROM tx_actor WHERE rowid = ?', (r,)); c.execute('COMMIT')
    def checkpoint():
        nonlocal frames
        frames += c.execute('PRAGMA wal_checkpoint(PASSIVE)').fetchone()[1]
    t0 = time.perf_counter()
    for b in range(batches):
        gs = [guid(b * args.batch + i) for i in range(args.batch)]
        # One statement per row, as the group commit runs them (executemany: little Python).
        batch(lambda: c.executemany("INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) VALUES (?, 'TRNF', 'SENT', ?, 1, datetime('now'), NULL) ON CONFLICT (guid) DO NOTHING", [(g, b'x' * 120) for g in gs]))
        batch(lambda: c.executemany("UPDATE tx SET state = 'DONE', rsp_code = '0000', response = ?, updated_at = datetime('now') WHERE guid = ? AND state = 'SENT' AND (1 IS NULL OR attempts = 1) AND (NULL IS NULL OR updated_at <= datetime('now', NULL))", [(b'y' * 45, g) for g in gs]))
        if b % 8 == 7: checkpoint()
    checkpoint()
    us = (time.perf_counter() - t0) / (batches * args.batch) * 1e6
    c.close()
    return us, frames / (batches * args.batch)

rng = random.Random(22)
def guid(n):
    if args.guids == 'streams': return f'bench-{n % 64:x}-{n // 64:x}'
    if args.guids == 'random': return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    b, i = divmod(n, args.batch)
    return f'{b:08x}-{i:04x}-4f1e-9a7b-{(b * 7919 + i * 104729) % 10**12:012d}'

PURGE = """DELETE FROM tx_history WHERE id IN (
        SELECT id FROM tx_history h
        WHERE at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?1)
        AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = h.guid
            AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3)))
        ORDER BY id LIMIT ?2)
    AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.guid = tx_history.guid
        AND NOT (tx.state = 'DONE' AND tx.updated_at < datetime('now', ?3)))"""

def purge(variant):
    c = fresh('purge-' + variant, VARIANTS[variant])
    n = args.purge_rows
    # Old history (400 days) of purged GUIDs, then as much young history (today) after it.
    c.execute('BEGIN')
    c.execute(f"""WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n})
        INSERT INTO tx_history (guid, from_state, to_state, who, at)
        SELECT printf('G%012d', i), 'SENT', 'DONE', 'relay',
               strftime('%Y-%m-%d %H:%M:%f', 'now', '-400 days', '+' || (i / 100) || ' seconds') FROM s""")
    c.execute(f"""WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n})
        INSERT INTO tx_history (guid, from_state, to_state, who) SELECT printf('Y%012d', i), 'SENT', 'DONE', 'relay' FROM s""")
    c.execute('COMMIT')
    chunks = []
    while True:
        t0 = time.perf_counter()
        c.execute('BEGIN IMMEDIATE'); k = c.execute(PURGE, ('-365 days', 10000, '-7 days')).rowcount; c.execute('COMMIT')
        chunks.append((time.perf_counter() - t0) * 1e3)
        if k < 10000: break
    c.close()
    return f'{len(chunks)} chunks, median {statistics.median(chunks[:-1] or chunks):.1f} ms, last {chunks[-1]:.1f} ms'

only = [v for v in args.only.split(',') if v] or [v for v in VARIANTS if v != 'noguid']
print(f'SQLite {sqlite3.sqlite_version}, {args.transfers} transfers, {args.batch} per transaction, '
      f'synchronous {args.sync}, GUIDs {args.guids}')
times = {v: [] for v in only}
for rnd in range(args.rounds):
    for v in only:
        times[v].append(run(v))
base = min(us for us, _ in times['none']) if 'none' in times else None
for v in only:
    us = [u for u, _ in times[v]]
    m = min(us)
    ratio = f'  none ÷ it {base / m:.2f}' if base else ''
    pages = statistics.median(p for _, p in times[v])
    print(f'{v:9} {m:7.1f} µs/transfer, median {statistics.median(us):.1f}, {pages:5.1f} WAL pages/transfer{ratio}')
if args.purge_rows:
    for v in ('v6', 'noat', 'new'):
        print(f'purge {args.purge_rows} old + {args.purge_rows} young history rows, {v}: {purge(v)}')
shutil.rmtree(tmp)
