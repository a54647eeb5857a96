#!/usr/bin/env bash
# Measures what a transfer costs on disk, for docs/sizing.md (*Backups*): N new transfers
# (default 100000) booked through a relay on a fresh SQLite ledger, from loadgen against the
# core simulator, so that each is a DONE row with its history, written by the relay's own
# statements; then the ledger's bytes per row (its file once the relay has stopped and folded
# its -wal in) and a backup's (`backup`, VACUUM INTO). Everything runs on 127.0.0.1 with ports
# picked by the kernel, in a temporary folder removed at the end; what is started is stopped
# (by pid). Needs cargo, bash and sqlite3 (for the row counts).
#
# usage: scripts/backup_size.sh [N]
set -euo pipefail

n=${1:-100000}
[[ $n =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: scripts/backup_size.sh [N]  (N transfers, default 100000)" >&2
    exit 2
}
command -v sqlite3 >/dev/null || {
    echo "backup_size.sh: sqlite3 is needed for the row counts" >&2
    exit 2
}
cd "$(dirname "$0")/.."
cargo build --quiet --bins -p relay -p coresim -p loadgen -p backup
bin=target/debug

work=$(mktemp -d)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
[[ -z ${KEEP_WORK:-} ]] || trap 'echo "kept $work"' EXIT

# start NAME ARGS...: runs a server, waits for `listening on`, sets $addr and $pid.
start() {
    local name=$1 out="$work/$1.out"
    shift
    "$bin/$name" "$@" >"$out" 2>"$work/$name.log" &
    pid=$!
    pids+=("$pid")
    local deadline=$((SECONDS + 30))
    until grep -q '^listening on ' "$out"; do
        if ((SECONDS > deadline)) || ! kill -0 "$pid" 2>/dev/null; then
            echo "backup_size.sh: $name did not start:" >&2
            cat "$work/$name.log" >&2
            exit 1
        fi
        sleep 0.05
    done
    addr=$(sed -n 's/^listening on //p' "$out" | head -n 1)
}

db="$work/ledger.db"
start coresim --listen 127.0.0.1:0
core=$addr
start relay --db "$db" --listen 127.0.0.1:0 --core "http://$core"
relay=$addr relay_pid=$pid
# The longest prefix loadgen takes (22): GUIDs of 29 characters, near a UUID's 36.
"$bin/loadgen" --relay "$relay" --requests "$n" --resend-ratio 0 --connections 16 \
    --guid-prefix "bsize-0123456789abcdef" >"$work/loadgen.json"
# SIGTERM: the relay finishes, and its last connection folds the -wal into the file.
kill "$relay_pid"
wait "$relay_pid" || true

# The -wal as the relay left it: its high-water mark (SQLite reuses it from the start after
# a checkpoint, without shrinking it). Then folded into the file and truncated, so that the
# file alone holds every row: the ledger's own size.
wal_bytes=$(stat -c %s "$db-wal" 2>/dev/null || echo 0)
sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
sql() { sqlite3 -readonly "$db" "$1"; }
rows=$(sql "SELECT count(*) FROM tx")
done_rows=$(sql "SELECT count(*) FROM tx WHERE state = 'DONE'")
history=$(sql "SELECT count(*) FROM tx_history")
ledger_bytes=$(stat -c %s "$db")
free_pages=$(sql "PRAGMA freelist_count")
to="$work/ledger-$(date -u +%Y%m%d-%H%M).db"
"$bin/backup" --db "$db" --to "$to" --min-free 0 >"$work/backup.out"
backup_bytes=$(stat -c %s "$to")

# Where the bytes are (SQLite's dbstat): the history stays after `purge` deletes a row,
# unless `purge --history-days`.
of_tables() { sql "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ($1)"; }
tx_bytes=$(of_tables "'tx', 'sqlite_autoindex_tx_1', 'tx_state_updated'")
history_bytes=$(of_tables "'tx_history', 'tx_history_guid'")

per() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a / b }'; }
echo "transfers:   $n sent, $rows rows ($done_rows DONE), $history history rows"
echo "ledger:      $ledger_bytes bytes ($free_pages free pages), $(per "$ledger_bytes" "$rows") bytes a row;" \
    "its -wal reached $wal_bytes bytes while the relay ran"
echo "             of which tx and its indexes $(per "$tx_bytes" "$rows") bytes a row," \
    "tx_history and its index $(per "$history_bytes" "$rows")"
echo "backup:      $backup_bytes bytes, $(per "$backup_bytes" "$rows") bytes a row"
echo "             $(cat "$work/backup.out")"
