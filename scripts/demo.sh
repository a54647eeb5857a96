#!/usr/bin/env bash
# The relay in two minutes: builds the workspace, starts the core simulator and the relay on
# free ports with a temp ledger, plays the scenarios that make banks pay twice, and shows that
# each GUID was booked once. Stops everything it started. Needs nothing but cargo and bash.
set -euo pipefail

if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
    echo "usage: scripts/demo.sh    (no arguments; builds with cargo, uses a temp dir)"
    exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
echo "== building (cargo build --workspace --bins)"
cargo build --workspace --bins --quiet
bin="${CARGO_TARGET_DIR:-$root/target}/debug"

work=$(mktemp -d)
db="$work/ledger.db"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME ARGS...: runs a server, waits for its `listening on` line, sets $addr.
start() {
    local name=$1; shift
    local out="$work/$name.out"
    : >"$out"
    "$bin/$name" "$@" >"$out" 2>>"$work/$name.log" &
    pids+=($!)
    local deadline=$((SECONDS + 30))
    until grep -q '^listening on ' "$out"; do
        if ((SECONDS > deadline)); then
            echo "$name did not start:"; cat "$work/$name.log"; exit 1
        fi
        sleep 0.05
    done
    addr=$(sed -n 's/^listening on //p' "$out" | head -n 1)
}

# wait_for WHAT COMMAND...: runs COMMAND (quietly) until it succeeds; gives up after 30 s.
wait_for() {
    local what=$1; shift
    local deadline=$((SECONDS + 30))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS > deadline)); then echo "gave up waiting for $what"; exit 1; fi
        sleep 0.05
    done
}

core_stats() {
    local host=${core%:*} port=${core##*:}
    exec 3<>"/dev/tcp/$host/$port"
    printf 'GET /_stats HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$core" >&3
    sed -n '/^\r$/,$p' <&3 | tail -n +2
    echo
    exec 3<&-
}

chan() { "$bin/chan" --relay "$relay" "$@"; }
# row GUID: the GUID's row in the ledger, as the operator tool lists it.
row() { "$bin/inspect" --db "$db" --guid "$1"; }
# in_ledger GUID [STATE]: whether the GUID has a row (in STATE).
in_ledger() { row "$1" | grep -q "^$1[[:space:]]*${2:-}"; }
# booked GUID: whether the core has booked the GUID.
booked() { core_stats | grep -q "\"$1\":"; }
step() { printf '\n== %s\n' "$*"; }

start coresim --listen 127.0.0.1:0 --slow-ms 2500 --journal "$work/core.journal"
core=$addr
# --late-reply-ms 0: the relay does not listen for the core's answer after its read timeout,
# so that step 6 has an UNKNOWN row for resolve (by default it listens 30 s longer, and a late
# answer settles the row itself).
start relay --db "$db" --listen 127.0.0.1:0 --core "http://$core" --read-timeout-ms 1500 \
    --late-reply-ms 0
relay=$addr
relay_pid=${pids[-1]}
echo "core simulator on $core, relay on $relay, ledger $db"

step "1. a new transfer is booked"
chan --guid DEMO-1 --amount 1500 --memo rent

step "2. the channel times out and resends DEMO-1: the stored reply, byte for byte"
a=$(chan --guid DEMO-1 --amount 1500 --memo rent --raw)
b=$(chan --guid DEMO-1 --amount 1500 --memo rent --raw)
printf 'first : %s\nresend: %s\n' "$a" "$b"
[[ "$a" == "$b" ]] && echo "identical"

step "3. the same GUID with another amount: E904, nothing sent"
chan --guid DEMO-1 --amount 9999 --memo rent

step "4. a resend while the first send is in flight: E903 at once"
chan --guid DEMO-2 --amount 250 --memo "SLOW salary" >"$work/slow.out" &
slow_pid=$!
wait_for "DEMO-2 to be claimed" in_ledger DEMO-2
chan --guid DEMO-2 --amount 250 --memo "SLOW salary"

step "5. the core answers after the relay's read timeout: E901, the ledger says UNKNOWN"
wait "$slow_pid"
cat "$work/slow.out"
echo "a resend is answered from the ledger, the core is not called again:"
chan --guid DEMO-2 --amount 250 --memo "SLOW salary"

step "6. resolve asks the core (GET, never POST) once the slow booking landed: UNKNOWN -> DONE"
wait_for "the core to book DEMO-2" booked DEMO-2 # 2.5 s after the request
in_ledger DEMO-2 'UNKNOWN[[:space:]]'
echo "the core has booked DEMO-2; the ledger still says UNKNOWN:"
row DEMO-2
echo "resolve (--min-age 0 only because the demo waited for the booking; it warns, rightly):"
"$bin/resolve" --db "$db" --core "http://$core" --min-age 0 2>&1
echo "the ledger now:"
row DEMO-2
in_ledger DEMO-2 'DONE[[:space:]]'
echo "the resend now gets the booking:"
chan --guid DEMO-2 --amount 250 --memo "SLOW salary"

step "the core's bookings per GUID so far"
core_stats

step "7. the core goes down: E902, the ledger proves the request never left (FAILED)"
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
chan --guid DEMO-3 --amount 75 --memo groceries
echo "the core comes back on the same port (it keeps its bookings, as a real core does); reprocess checks it answers, then resends only proven-unsent rows:"
start coresim --listen "$core" --slow-ms 2500 --journal "$work/core.journal"
"$bin/reprocess" --db "$db" --core "http://$core" --max-attempts 3 2>/dev/null
chan --guid DEMO-3 --amount 75 --memo groceries

step "the ledger"
"$bin/inspect" --db "$db"

step "the restarted core's bookings per GUID"
core_stats
echo "relay log:"
sed 's/^/  /' "$work/relay.log"
kill "$relay_pid" 2>/dev/null || true
echo
echo "demo done"
