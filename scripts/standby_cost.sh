#!/usr/bin/env bash
# standby_cost.sh: what a synchronous standby costs a transfer. One PostgreSQL primary and a
# streaming standby of it (pg_basebackup -R), both on this machine; one relay on the primary
# in front of the core simulator; the load generator at 1 and at 64 connections, each run
# with the standby asynchronous and then synchronous (`synchronous_standby_names` '' / '*',
# reloaded, the standby's sync_state checked), alternating, so that drift falls on both. A
# transfer commits twice (the claim, then the result), so each waits twice for the standby's
# flush: the extra latency at one connection is that, plus the round trip, here ~0.
#
#   scripts/standby_cost.sh [--secs 10] [--rounds 2]
#
# Needs cargo, bash, python3 and PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup,
# psql). Builds relay, coresim and loadgen in release. Stops what it started.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=10
rounds=2
while (($#)); do
    case $1 in
        --secs) secs=${2:?--secs needs a number}; shift 2 ;;
        --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "standby_cost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

source "$root/scripts/pg_pair.sh"
[[ -x $pg_bin/initdb ]] || { echo "standby_cost.sh: PostgreSQL's server binaries are not installed" >&2; exit 2; }

echo "== building (cargo build --release -p relay -p coresim -p loadgen)"
cargo build --release --quiet -p relay -p coresim -p loadgen
bin=${CARGO_TARGET_DIR:-$root/target}/release

work=$(mktemp -d /tmp/standby-cost.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pg_pair_stop
    rm -rf "$work"
}
trap cleanup EXIT

pg_pair_start "$work"
admin=$pg_admin
sql() { pg_sql "$1"; }
echo "== PostgreSQL $("$pg_bin/postgres" -V | awk '{print $3}'): primary 127.0.0.1:$primary_port, standby 127.0.0.1:$standby_port"

# start NAME ARGS...: starts a server that prints `listening on ADDR`; sets $addr.
start() {
    local name=$1 log="$work/$1.log"
    shift
    "$bin/$name" "$@" >"$log.out" 2>"$log" &
    pids+=($!)
    for _ in $(seq 1 300); do
        addr=$(grep -o '^listening on [0-9.:]*' "$log.out" 2>/dev/null | head -n 1 | cut -d' ' -f3 || true)
        [[ -n $addr ]] && return
        sleep 0.05
    done
    echo "standby_cost.sh: $name did not start: $(cat "$log")" >&2
    exit 1
}

sql "CREATE SCHEMA ledger" >/dev/null
start coresim --listen 127.0.0.1:0
core=$addr
start relay --db "$admin?options=-c%20search_path%3Dledger" --listen 127.0.0.1:0 --core "http://$core"
relay=$addr

results="$work/results.jsonl"
for round in $(seq 1 "$rounds"); do
    for conns in 1 64; do
        for mode in async sync; do
            pg_sync "$mode"
            out=$("$bin/loadgen" --relay "$relay" --connections "$conns" --duration-secs "$secs" \
                --warmup-secs 1 --guid-prefix "SC$round-$mode-c$conns-$RANDOM")
            echo "{\"round\": $round, \"mode\": \"$mode\", \"connections\": $conns, \"run\": $out}" >>"$results"
            python3 - "$out" "$round" "$mode" "$conns" <<'PY'
import json, sys
r, (rnd, mode, conns) = json.loads(sys.argv[1]), sys.argv[2:]
lat = r["latency_ms"]
print(f"   round {rnd} {mode:>5} c{conns:<3} {r['throughput_rps']:>8} rps  p50 {lat['p50']} ms  p99 {lat['p99']} ms")
PY
        done
    done
done

python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def med(mode, conns, f):
    return statistics.median(f(r["run"]) for r in runs if r["mode"] == mode and r["connections"] == conns)
rps = lambda r: r["throughput_rps"]
p50 = lambda r: r["latency_ms"]["p50"]
print("== a synchronous standby (medians over the rounds)")
for c in (1, 64):
    a, s = med("async", c, rps), med("sync", c, rps)
    la, ls = med("async", c, p50), med("sync", c, p50)
    print(f"   {c:>2} connection(s): {a:.0f} -> {s:.0f} rps ({s / a:.2f} of async); "
          f"p50 {la:.3f} -> {ls:.3f} ms (+{ls - la:.3f} ms per transfer, two commits)")
PY
