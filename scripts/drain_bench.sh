#!/usr/bin/env bash
# Measures how fast `resolve` drains a ledger of UNKNOWN rows against the core simulator,
# one inquiry at a time and several at once (`--parallel K`), on copies of the same ledger.
#
# Half the rows were booked by the core (their inquiry answers 200: DONE), half never were
# (404: FAILED/E902). Every run is checked: each row examined once, half DONE and half
# FAILED, and the core's bookings unchanged (resolve never POSTs). Everything started here
# is stopped on exit (by pid). Needs cargo, bash and python3 (standard library only); with
# --pg, psql.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/drain_bench.sh [--rows N] [--parallel "1 8"] [--inquiry-ms MS] [--pg URL]

  --rows N          UNKNOWN rows in the ledger (default 20000; half booked at the core)
  --parallel "K…"   the resolve --parallel values to run, each on a fresh copy of the same
                    ledger (default "1 8")
  --inquiry-ms MS   the simulator thinks MS milliseconds over every inquiry (default 0: as
                    fast as loopback allows; a real core's inquiry takes milliseconds)
  --pg URL          also on PostgreSQL: URL is a server's maintenance database (e.g.
                    postgres://postgres@127.0.0.1:5432/postgres) where this script may
                    create and drop databases named drain_bench_*
  --help            this text

Builds `resolve` and `coresim` with `cargo build --release`, then for each backend and each
K prints one line: rows, K, seconds, rows/s. Exit status: 0 if every run settled every row
as expected, 1 if one did not, 2 for a usage error.
EOF
}

rows=20000
parallel="1 8"
inquiry_ms=0
pg_url=""
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --rows) rows=${2:?--rows needs a value}; shift ;;
        --parallel) parallel=${2:?--parallel needs a value}; shift ;;
        --inquiry-ms) inquiry_ms=${2:?--inquiry-ms needs a value}; shift ;;
        --pg) pg_url=${2:?--pg needs a value}; shift ;;
        *) echo "drain_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ $rows =~ ^[0-9]+$ ]] && ((rows >= 2 && rows % 2 == 0)) ||
    { echo "drain_bench.sh: --rows must be an even number >= 2" >&2; exit 2; }
[[ $inquiry_ms =~ ^[0-9]+$ ]] || { echo "drain_bench.sh: bad --inquiry-ms" >&2; exit 2; }
for k in $parallel; do
    [[ $k =~ ^[0-9]+$ ]] || { echo "drain_bench.sh: bad --parallel value $k" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "drain_bench.sh: python3 is needed" >&2; exit 1; }
[[ -z $pg_url ]] || command -v psql >/dev/null ||
    { echo "drain_bench.sh: psql is needed for --pg" >&2; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
bin=$target_dir/release

echo "== building (cargo build --release -p resolve -p coresim --quiet)"
cargo build --release -p resolve -p coresim --quiet

work=$(mktemp -d "${TMPDIR:-/tmp}/drain-bench.XXXXXX")
core_pid=""
cleanup() {
    [[ -z $core_pid ]] || kill "$core_pid" 2>/dev/null || true
    [[ -z $core_pid ]] || wait "$core_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The core simulator on a free port; its first stdout line says where.
"$bin/coresim" --listen 127.0.0.1:0 --inquiry-ms "$inquiry_ms" \
    >"$work/coresim.out" 2>"$work/coresim.log" &
core_pid=$!
for _ in $(seq 100); do
    grep -q '^listening on ' "$work/coresim.out" 2>/dev/null && break
    sleep 0.1
done
addr=$(sed -n 's/^listening on //p' "$work/coresim.out")
[[ -n $addr ]] || { echo "drain_bench.sh: coresim did not start" >&2; exit 1; }
core=http://$addr

# GUID i is DB-<i, 6 digits>; its request is the channel message the relay would have stored
# (126 bytes); even rows are booked at the core.
echo "== booking $((rows / 2)) of $rows GUIDs at the core ($core, --inquiry-ms $inquiry_ms)"
python3 - "$addr" "$rows" <<'EOF'
import http.client, json, sys
host, port = sys.argv[1].rsplit(":", 1)
rows = int(sys.argv[2])
c = http.client.HTTPConnection(host, int(port), timeout=30)
for i in range(0, rows, 2):
    body = json.dumps({"guid": f"DB-{i:06d}", "tx_code": "TRNF",
                       "from_account": "00000000000001", "to_account": "00000000000002",
                       "amount": 100 + i, "memo": "drain bench"})
    c.request("POST", "/v1/transfers", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"booking DB-{i:06d}: HTTP {r.status}")
EOF

stat() {
    python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1] + "/_stats"))[sys.argv[2]])' "$core" "$1"
}
bookings_before=$(stat bookings)

# The ledger's rows, as SQL for each backend: UNKNOWN/E901, attempt 1, an hour old.
sqlite_rows="
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $rows - 1)
INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at)
SELECT printf('DB-%06d', i), 'TRNF', 'UNKNOWN', 'E901',
       CAST('QTRNF' || printf('%-36s', printf('DB-%06d', i)) || '    ' || '00000000000001'
            || '00000000000002' || printf('%013d', 100 + i) || printf('%-40s', 'drain bench')
            AS BLOB),
       1, datetime('now', '-1 hours')
FROM n;"
pg_rows="
INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at)
SELECT 'DB-' || lpad(i::text, 6, '0'), 'TRNF', 'UNKNOWN', 'E901',
       convert_to('QTRNF' || rpad('DB-' || lpad(i::text, 6, '0'), 36) || '    '
                  || '00000000000001' || '00000000000002' || lpad((100 + i)::text, 13, '0')
                  || rpad('drain bench', 40), 'UTF8'),
       1, now() - interval '1 hour'
FROM generate_series(0, $rows - 1) AS i;"

python3 - "$work/base.db" "$root/schema.sql" "$sqlite_rows" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript(open(sys.argv[2]).read())
db.executescript("BEGIN;" + sys.argv[3] + "COMMIT;")
db.close()
EOF

status=0
results=()
# run BACKEND K DB: one resolve run, timed and checked.
run() {
    local backend=$1 k=$2 db=$3 t0 t1 out
    t0=$EPOCHREALTIME
    out=$("$bin/resolve" --db "$db" --core "$core" --min-age 300 --parallel "$k" --json \
        2>"$work/resolve-$backend-$k.log") || true
    t1=$EPOCHREALTIME
    local line
    line=$(python3 - "$out" "$rows" "$t0" "$t1" "$backend" "$k" <<'EOF'
import json, sys
out, rows, t0, t1, backend, k = sys.argv[1:]
rows, secs = int(rows), float(t1) - float(t0)
try:
    j = json.loads(out)
except ValueError:
    print(f"FAIL {backend} K={k}: no summary: {out!r}")
    sys.exit()
ok = (j["examined"], j["done"], j["failed"], j["exit_code"]) == (rows, rows // 2, rows // 2, 0)
verdict = "ok" if ok else f"FAIL {j}"
print(f"{backend:10} rows={rows} parallel={k:>3}  {secs:8.2f} s  {rows / secs:9.0f} rows/s  {verdict}")
EOF
)
    echo "$line"
    results+=("$line")
    [[ $line == *" ok" ]] || status=1
}

echo "== SQLite: resolve --min-age 300 --parallel K --json, each on a copy of the same ledger"
for k in $parallel; do
    cp "$work/base.db" "$work/run-$k.db"
    run sqlite "$k" "$work/run-$k.db"
done

if [[ -n $pg_url ]]; then
    echo "== PostgreSQL: the same, each on a fresh database"
    for k in $parallel; do
        name=drain_bench_$k
        psql -q -X -v ON_ERROR_STOP=1 "$pg_url" -c "SET client_min_messages TO warning" \
            -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
        url=$(python3 -c '
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$pg_url" "$name")
        psql -q -X -v ON_ERROR_STOP=1 "$url" -f "$root/schema.postgres.sql" \
            -c "$pg_rows" -c "VACUUM ANALYZE tx" >/dev/null
        run postgres "$k" "$url"
        psql -q -X "$pg_url" -c "DROP DATABASE IF EXISTS $name" >/dev/null
    done
fi

bookings_after=$(stat bookings)
if [[ $bookings_after != "$bookings_before" ]]; then
    echo "FAIL: the core's bookings changed ($bookings_before -> $bookings_after)"
    status=1
fi
echo "== inquiries answered by the core: $(stat inquiries); bookings unchanged: $bookings_after"
exit "$status"
