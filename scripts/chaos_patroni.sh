#!/usr/bin/env bash
# chaos_patroni.sh: the chaos run on a highly available PostgreSQL ledger, as a bank runs it:
# one etcd and three Patroni nodes in strict synchronous mode (scripts/patroni_cluster.sh,
# Debian's `patroni` and `etcd-server`, installed if missing), the relays on a multi-host URL
# naming all three (`target_session_attrs=read-write`), the chaos run's channels, relay
# kills, core outages, resolve and reprocess (`chaos --db`). While it runs, at times drawn
# from the seed, four faults, each on whichever nodes hold the roles then:
#  1. the synchronous standby frozen for a second: commits wait for it (E905);
#  2. a failover: the synchronous standby frozen, the leader killed a second later (its
#     Patroni and every process of its server: the host is gone), the standby thawed; Patroni
#     promotes it; the old leader is started again and rejoins (pg_rewind if needed);
#  3. a partition, then the leader lost: replication cut for 2 s (the standbys reach their
#     leader through scripts/cut_proxy.py; commits wait), the leader killed, the cut healed,
#     the leader started again after 15 s. Patroni took the synchronous standby's privilege
#     when it went away, so no node may be promoted: the cluster waits for the old leader
#     (no writable host for ~20 s), and loses nothing;
#  4. a standby killed and started again 5 s later.
# The run's checks then read the ledger on whichever node leads: no GUID booked twice, every
# 0000 a channel saw is what the ledger holds byte for byte, every row settled.
#
#   scripts/chaos_patroni.sh [--secs 60] [--seed 1] [--relays 2] [--keep] [--unsafe-async]
#
# --unsafe-async is the negative control, never a deployment: asynchronous replication and
# any standby promoted however far behind. At fault 3, the claims the primary committed
# while cut off from its standbys die with it; the core booked them, and the channels'
# resends book them again. The run must FAIL (exit 1); the script then exits 0, and 1 if the run passed.
#
# Needs cargo, bash, python3, PostgreSQL's server binaries and psql; apt-get (as root) if
# Patroni or etcd is missing. Exit: chaos's (0 no violation, 1 violations, 2 the run could
# not be carried out).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
secs=60
seed=1
relays=2
keep=0
pc_async=0
while (($#)); do
    case $1 in
        --secs) secs=${2:?--secs needs a number}; shift 2 ;;
        --seed) seed=${2:?--seed needs a number}; shift 2 ;;
        --relays) relays=${2:?--relays needs a number}; shift 2 ;;
        --keep) keep=1; shift ;;
        --unsafe-async) pc_async=1; shift ;;
        -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "chaos_patroni.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $secs =~ ^[0-9]+$ ]] && ((secs >= 60)) ||
    { echo "chaos_patroni.sh: --secs must be a number, at least 60 (four faults; a failover takes ~10 s)" >&2; exit 2; }
[[ $seed =~ ^[0-9]+$ ]] || { echo "chaos_patroni.sh: --seed must be a number" >&2; exit 2; }

source "$root/scripts/patroni_cluster.sh"
[[ -x $pc_bin/initdb ]] || { echo "chaos_patroni.sh: PostgreSQL's server binaries are not installed" >&2; exit 2; }

echo "== building (scripts/release_build.sh --all)"
bash "$root/scripts/release_build.sh" --all --quiet
bin=${CARGO_TARGET_DIR:-$root/target}/release

work=$(mktemp -d /tmp/chaos-patroni.XXXXXX)
chaos_pid=""
faults_pid=""
cleanup() {
    [[ -z $chaos_pid ]] || kill "$chaos_pid" 2>/dev/null || true
    [[ -z $faults_pid ]] || kill "$faults_pid" 2>/dev/null || true
    pc_stop
    if ((keep)); then echo "== kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

t0=$SECONDS
pc_start "$work" || exit 2
if ((pc_async)); then mode="asynchronous replication (the negative control)"; else mode="synchronous standby $(pc_role sync_standby), strict"; fi
echo "== etcd and 3 Patroni nodes up in $((SECONDS - t0)) s: leader $(pc_role leader), $mode"
psql -qAtX "$pc_admin" -c "CREATE SCHEMA ledger" >/dev/null
url="${pc_url}&options=-c%20search_path%3Dledger"
echo "== chaos --db $url"

# The fault schedule, from the seed (bash's RANDOM is seeded by assigning to it).
RANDOM=$seed
at_freeze=$((secs / 20 + RANDOM % (secs / 20)))
at_failover=$((secs * 3 / 20 + RANDOM % (secs / 20)))
at_cut=$((secs * 9 / 20 + RANDOM % (secs / 20)))
at_standby=$((secs * 16 / 20 + RANDOM % (secs / 20)))
which_standby=$((RANDOM % 2))

start=$SECONDS
say() { echo "== t=$((SECONDS - start))s: $*"; }
until_t() { local wait=$(($1 - (SECONDS - start))); ((wait <= 0)) || sleep "$wait"; }
# pc_standby: the synchronous standby (an asynchronous one in the negative control).
pc_standby() {
    local node
    node=$(pc_role sync_standby)
    [[ -n $node ]] || node=$(pc_role replica)
    echo "$node"
}
# whole_again BY: waits for a leader and both standbys, until 10 s after t=BY s (the next
# fault's time; at least 5 s): a node slow to rejoin must not push the next fault past the
# traffic (a CI run's negative control saw no loss: the old leader had not rejoined in 60 s,
# and the partition came after the run had ended).
whole_again() {
    local by=$(($1 + 10)) left
    left=$((by - (SECONDS - start)))
    ((left >= 5)) || left=5
    if pc_wait_writable "$left"; then say "a leader again: $(pc_role leader)"; else say "no leader within $left s"; fi
    left=$((by - (SECONDS - start)))
    ((left >= 1)) || left=1
    pc_wait_standbys "$left" || say "the cluster not whole again by t=${by}s; the next step goes ahead"
}
faults() {
    local node standby
    until_t "$at_freeze"
    standby=$(pc_standby)
    say "1. the (synchronous) standby ${standby:-(none)} frozen for 1 s (commits wait for it: E905)"
    [[ -z $standby ]] || pc_freeze "$standby" 1

    until_t "$at_failover"
    node=$(pc_role leader)
    standby=$(pc_standby)
    say "2. failover: the (synchronous) standby ${standby:-(none)} frozen; 1 s later the leader $node killed, the standby thawed"
    [[ -z $standby ]] || pc_pause "$standby"
    sleep 1
    [[ -z $node ]] || pc_kill "$node"
    pc_resume
    pc_wait_writable 60 && say "a leader again: $(pc_role leader)"
    [[ -z $node ]] || { say "$node started again (it rejoins)"; pc_restart "$node"; }
    whole_again "$at_cut"

    until_t "$at_cut"
    node=$(pc_role leader)
    say "3. partition: replication cut for 2 s (commits wait, unless asynchronous); then the leader $node killed, the cut healed"
    pc_cut
    sleep 2
    [[ -z $node ]] || pc_kill "$node"
    pc_heal
    # Started again once another node leads, or after 15 s (ttl 10): soon enough to resume as
    # the leader if none may take over, late enough to leave Patroni the choice.
    pc_wait_writable 15 && say "a leader again: $(pc_role leader)"
    [[ -z $node ]] || { say "$node started again"; pc_restart "$node"; }
    whole_again "$at_standby"

    until_t "$at_standby"
    if ((which_standby)); then node=$(pc_role replica); else node=$(pc_role sync_standby); fi
    say "4. the standby ${node:-(none)} killed"
    [[ -z $node ]] || pc_kill "$node"
    sleep 5
    [[ -z $node ]] || { say "$node started again"; pc_restart "$node"; }
    whole_again "$secs"
    say "faults done: leader $(pc_role leader), synchronous standby $(pc_role sync_standby)"
}
faults &
faults_pid=$!

# In the run's own folder: chaos keeps its work dir after violations, which cleanup removes
# unless --keep.
"$bin/chaos" --db "$url" --relays "$relays" --secs "$secs" --seed "$seed" --work-dir "$work" &
chaos_pid=$!
rc=0
wait "$chaos_pid" || rc=$?
chaos_pid=""
wait "$faults_pid" 2>/dev/null || true
faults_pid=""
if ((pc_async)); then
    case $rc in
        1) echo "chaos_patroni.sh: the negative control FAILED, as it must: commits lost in an asynchronous failover are seen"; exit 0 ;;
        0) echo "chaos_patroni.sh: the negative control PASSED: the run did not see the commits an asynchronous failover lost" >&2; exit 1 ;;
        *) exit "$rc" ;;
    esac
fi
exit "$rc"
