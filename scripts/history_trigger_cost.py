#!/usr/bin/env python3
"""What the SQLite history triggers cost the writer, without the relay: 20,000 transfers
(claim INSERT + result UPDATE, 50 per transaction as the group commit makes them, fsync off) on
schema.sql as is, without its tx triggers, and with the at index / AUTOINCREMENT left out.
Prints microseconds per transfer. Usage: python3 scripts/history_trigger_cost.py [--rounds N]"""
import argparse, os, shutil, sqlite3, tempfile, time
parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument('--rounds', type=int, default=2, help='how many times each variant is timed (default 2)')
args = parser.parse_args()
if args.rounds < 1:
    parser.error('--rounds must be at least 1')
tmp = tempfile.mkdtemp()
schema = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'schema.sql')).read()
def run(variant):
    p = os.path.join(tmp, f'{variant}.db')
    for s in ('', '-wal', '-shm'):
        try: os.remove(p + s)
        except FileNotFoundError: pass
    c = sqlite3.connect(p, isolation_level=None)
    c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA synchronous=OFF')
    sch = schema
    if variant == 'noat': sch = sch.replace('CREATE INDEX IF NOT EXISTS tx_history_at ON tx_history (at);', '')
    if variant == 'noauto': sch = sch.replace('INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY')
    if variant == 'both': sch = sch.replace('CREATE INDEX IF NOT EXISTS tx_history_at ON tx_history (at);', '').replace('INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY')
    c.executescript(sch)
    if variant == 'none':
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='tx'").fetchall():
            c.execute(f'DROP TRIGGER {t}')
    t0 = time.perf_counter(); n = 0
    for b in range(400):
        c.execute('BEGIN IMMEDIATE'); c.execute("INSERT INTO tx_actor (who) VALUES ('relay')")
        for i in range(50):
            g = f'G{b}-{i}-xxxxxxxxxxxxxxxxxxxxxxxx'
            c.execute("INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at) VALUES (?, 'TRNF', 'SENT', ?, 1, datetime('now')) ON CONFLICT DO NOTHING", (g, b'x'*120))
            c.execute("UPDATE tx SET state='DONE', rsp_code='0000', response=?, updated_at=datetime('now') WHERE guid=? AND state='SENT' AND attempts=1", (b'y'*45, g))
            n += 1
        c.execute('DELETE FROM tx_actor'); c.execute('COMMIT')
    return (time.perf_counter() - t0) / n * 1e6
for rnd in range(args.rounds):
    print(rnd, {v: round(run(v), 1) for v in ('none', 'current', 'noat', 'noauto', 'both')}, 'µs/transfer')
shutil.rmtree(tmp)
