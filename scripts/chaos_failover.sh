#!/usr/bin/env bash
# chaos_failover.sh: the chaos run through a database failover. A PostgreSQL primary and its
# synchronous standby (scripts/pg_pair.sh); the chaos run (relays SIGKILLed and restarted,
# core outages, resolve and reprocess alongside, 32 channels) on a ledger named by a
# multi-host URL, primary first, `target_session_attrs=read-write` (`chaos --db`). A third
# of the way in, the standby is frozen for a second (commits wait for it), then every process
# of the primary is SIGKILLed and the standby thawed; two seconds later it is promoted. The relays find it by themselves (E905 in the gap); the run's checks then read
# the ledger on the new primary: no GUID booked twice, every 0000 a channel saw is what the
# ledger holds, byte for byte, every row settled.
#
#   scripts/chaos_failover.sh [--secs 30] [--seed 1] [--relays 2]
#
# Needs cargo, bash, python3 and PostgreSQL's server binaries. Exit: chaos's (0 no
# violation, 1 violations, 2 the run could not be carried out).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=30
seed=1
relays=2
while (($#)); do
    case $1 in
        --secs) secs=${2:?--secs needs a number}; shift 2 ;;
        --seed) seed=${2:?--seed needs a number}; shift 2 ;;
        --relays) relays=${2:?--relays needs a number}; shift 2 ;;
        -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "chaos_failover.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
((secs >= 9)) || { echo "chaos_failover.sh: --secs must be at least 9" >&2; exit 2; }

source "$root/scripts/pg_pair.sh"
[[ -x $pg_bin/initdb ]] || { echo "chaos_failover.sh: PostgreSQL's server binaries are not installed" >&2; exit 2; }

echo "== building (scripts/release_build.sh --all)"
bash "$root/scripts/release_build.sh" --all --quiet
bin=${CARGO_TARGET_DIR:-$root/target}/release

work=$(mktemp -d /tmp/chaos-failover.XXXXXX)
chaos_pid=""
cleanup() {
    [[ -z $chaos_pid ]] || kill "$chaos_pid" 2>/dev/null || true
    pg_pair_stop
    rm -rf "$work"
}
trap cleanup EXIT

pg_pair_start "$work"
pg_sync sync
pg_sql "CREATE SCHEMA ledger" >/dev/null
url="postgres://postgres@127.0.0.1:$primary_port,127.0.0.1:$standby_port/postgres?options=-c%20search_path%3Dledger&target_session_attrs=read-write"
echo "== primary 127.0.0.1:$primary_port, synchronous standby 127.0.0.1:$standby_port; chaos --db $url"

"$bin/chaos" --db "$url" --relays "$relays" --secs "$secs" --seed "$seed" &
chaos_pid=$!

sleep "$((secs / 3 - 1))"
# pids_of DATA: the server's postmaster and its children.
pids_of() {
    local pm
    pm=$(head -n 1 "$1/postmaster.pid")
    echo "$pm $(pgrep -P "$pm" | tr '\n' ' ')"
}
standby_pids=$(pids_of "$work/standby")
echo "== failover: the synchronous standby frozen for 1 s (commits wait: E905)"
kill -STOP $standby_pids
sleep 1
echo "== failover: SIGKILL to every process of the primary (the host is gone)"
kill -KILL $(pids_of "$work/primary")
kill -CONT $standby_pids
sleep 2
echo "== failover: the standby promoted"
as_pg "$pg_bin/pg_ctl" promote -w -t 30 -D "$work/standby" >/dev/null
echo "== failover: done; the run goes on against the new primary"

rc=0
wait "$chaos_pid" || rc=$?
chaos_pid=""
exit "$rc"
