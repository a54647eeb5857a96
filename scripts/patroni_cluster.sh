# patroni_cluster.sh (sourced): one etcd and three Patroni nodes on 127.0.0.1, from Debian's
# packages (`patroni`, `etcd-server`), in strict synchronous mode: a commit waits for the
# synchronous standby, and only it may be promoted. For scripts/chaos_patroni.sh. As root,
# etcd and Patroni run as the postgres user (Patroni refuses to run PostgreSQL as root).
#
#   pc_start DIR         # etcd and nodes n1 n2 n3 up in DIR, a leader elected and a
#                        # synchronous standby streaming; sets pc_url (every node, for the
#                        # relay) and pc_admin (psql's URL to the leader). With pc_async=1
#                        # set before: asynchronous replication, and any standby however far
#                        # behind may be promoted (a negative control: commits get lost)
#   pc_role ROLE         # the node holding ROLE now (leader, sync_standby, replica), or ""
#   pc_kill NODE         # SIGKILL to the node's Patroni and to every process of its server
#   pc_freeze NODES SECS # the nodes' servers stopped (SIGSTOP) for SECS, then resumed
#   pc_pause NODES       # the same in two steps: stopped, and pc_resume resumes them
#   pc_cut / pc_heal     # replication cut (every stream reset, none made) / allowed again
#
# The standbys stream from their leader through scripts/cut_proxy.py (each node's
# connect_address is its proxy port; the relays use the servers' own ports), so that a cut
# leaves the leader's latest WAL on the leader alone: a frozen standby would still receive
# it, into its socket buffer.
#   pc_restart NODE      # the node's Patroni started again: it rejoins (pg_rewind if needed)
#   pc_wait_writable N   # wait up to N seconds for a leader that takes a write
#   pc_stop              # everything stopped, whatever state it is in
#
# Timings (bootstrap.dcs): ttl 10, loop_wait 1, retry_timeout 4 (loop_wait + 2 x
# retry_timeout <= ttl, as Patroni requires): a leader gone is replaced within about ttl.

# pg_bin, as_pg and free_port are pg_pair.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/pg_pair.sh"
pc_bin=$pg_bin
pc_dir=""
pc_async=${pc_async:-0}
pc_nodes=(n1 n2 n3)
declare -A pc_pg_port pc_api_port pc_proxy_port

# pc_install: Debian's packages, if missing (CI's machine starts without them). The packages'
# own services are not started: there is no init here, and this file starts its own.
pc_install() {
    command -v patroni >/dev/null && command -v etcd >/dev/null && return 0
    echo "== apt-get install patroni etcd-server"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        patroni etcd-server >/dev/null 2>&1 ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends patroni etcd-server >/dev/null; }
    # The package may have started its own etcd on 2379: not ours, and in the way of nothing.
}

pc_config() {
    local node=$1 etcd_port=$2 sync=true lag=1048576
    ((pc_async)) && sync=false && lag=1099511627776
    cat <<EOF
scope: txrelay
name: $node
namespace: /txrelay/
log:
  level: INFO
restapi:
  listen: 127.0.0.1:${pc_api_port[$node]}
  connect_address: 127.0.0.1:${pc_api_port[$node]}
etcd3:
  hosts: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: $lag
    synchronous_mode: $sync
    synchronous_mode_strict: $sync
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_log_hints: 'on'
        synchronous_commit: 'on'
  initdb:
    - encoding: UTF8
    - auth: trust
postgresql:
  listen: 127.0.0.1:${pc_pg_port[$node]}
  connect_address: 127.0.0.1:${pc_proxy_port[$node]}
  data_dir: $pc_dir/$node/data
  bin_dir: $pc_bin
  # A node whose rewind fails is cloned again from the leader, rather than left down for the
  # rest of the run (a throwaway cluster; its data is the leader's).
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  pgpass: $pc_dir/$node/pgpass
  authentication:
    superuser: {username: postgres, password: unused}
    replication: {username: replicator, password: unused}
    rewind: {username: postgres, password: unused}
  parameters:
    unix_socket_directories: $pc_dir/$node
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
EOF
}

pc_start() {
    [[ -x $pc_bin/initdb ]] || { echo "PostgreSQL's server binaries are not installed" >&2; return 2; }
    pc_install
    pc_dir=$1
    ((EUID == 0)) && chown postgres "$pc_dir"
    local etcd_port peer_port node
    etcd_port=$(free_port)
    peer_port=$(free_port)
    as_pg etcd --name e1 --data-dir "$pc_dir/etcd" --log-level error \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "e1=http://127.0.0.1:$peer_port" >"$pc_dir/etcd.log" 2>&1 &
    local hosts="" routes=()
    for node in "${pc_nodes[@]}"; do
        pc_pg_port[$node]=$(free_port)
        pc_api_port[$node]=$(free_port)
        pc_proxy_port[$node]=$(free_port)
        routes+=("${pc_proxy_port[$node]}:${pc_pg_port[$node]}")
        as_pg mkdir -p "$pc_dir/$node"
        pc_config "$node" "$etcd_port" | as_pg tee "$pc_dir/$node/patroni.yml" >/dev/null
        hosts+="${hosts:+,}127.0.0.1:${pc_pg_port[$node]}"
    done
    python3 "$(dirname "${BASH_SOURCE[0]}")/cut_proxy.py" "${routes[@]}" >"$pc_dir/proxy.out" 2>&1 &
    pc_proxy_pid=$!
    local _
    for _ in $(seq 1 100); do grep -q ready "$pc_dir/proxy.out" && break; sleep 0.05; done
    grep -q ready "$pc_dir/proxy.out" || { echo "cut_proxy.py did not start" >&2; return 1; }
    # The first node bootstraps alone, so that the leader is known; the others then clone it.
    pc_restart n1
    pc_wait_writable 60 || { echo "patroni: no leader within 60 s (see $pc_dir/n1/patroni.log)" >&2; return 1; }
    pc_restart n2
    pc_restart n3
    pc_wait_standbys 90 || { echo "patroni: the leader not streaming to both others within 90 s" >&2; return 1; }
    pc_url="postgres://postgres@$hosts/postgres?target_session_attrs=read-write"
}

# pc_cluster: Patroni's view of the cluster (GET /cluster) from any node that answers.
pc_cluster() {
    local node
    for node in "${pc_nodes[@]}"; do
        python3 - "${pc_api_port[$node]}" 2>/dev/null <<'EOF' && return 0
import json, sys, urllib.request
c = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/cluster", timeout=1))
for m in c.get("members", []):
    print(m["name"], m["role"], m["state"], m.get("lag", ""))
EOF
    done
    return 1
}

pc_role() { pc_cluster | awk -v r="$1" '$2 == r && $3 == "running" { print $1; exit }'; }

# pc_wait_standbys N: wait up to N seconds for the leader to stream to both others, one of
# them synchronous (unless pc_async), as the leader itself sees it.
pc_wait_standbys() {
    local deadline=$((SECONDS + $1)) want="2 1"
    ((pc_async)) && want="2 0"
    while ((SECONDS < deadline)); do
        pc_wait_writable 1 && [[ $(psql -qAtX "$pc_admin" -c "SELECT count(*) || ' ' ||
            count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication
            WHERE state = 'streaming' AND application_name IN ('n1', 'n2', 'n3')" \
            2>/dev/null) == "$want" ]] &&
            [[ $(pc_cluster | awk '$3 == "running"' | wc -l) == 3 ]] &&
            { ((pc_async)) || [[ -n $(pc_role sync_standby) ]]; } &&
            return 0
        sleep 0.2
    done
    return 1
}

pc_wait_writable() {
    local deadline=$((SECONDS + $1)) leader
    while ((SECONDS < deadline)); do
        leader=$(pc_role leader)
        if [[ -n $leader ]] && psql -qAtX "postgres://postgres@127.0.0.1:${pc_pg_port[$leader]}/postgres?connect_timeout=1" \
            -c "SELECT pg_is_in_recovery()" 2>/dev/null | grep -qx f; then
            pc_admin="postgres://postgres@127.0.0.1:${pc_pg_port[$leader]}/postgres"
            return 0
        fi
        sleep 0.2
    done
    return 1
}

# pc_server_pids NODE: the node's postmaster and its children, if it runs.
pc_server_pids() {
    local pm
    pm=$(head -n 1 "$pc_dir/$1/data/postmaster.pid" 2>/dev/null) || return 0
    kill -0 "$pm" 2>/dev/null || return 0
    echo "$pm $(pgrep -P "$pm" | tr '\n' ' ')"
}

pc_kill() {
    local node=$1 pids
    # Patroni (and runuser before it, as root) by its command line: the config is the node's.
    pids="$(pgrep -f -- "$pc_dir/$node/patroni.yml" | tr '\n' ' ') $(pc_server_pids "$node")"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
}

# pc_pause "NODE...": the nodes' servers stopped (SIGSTOP), all at once; pc_resume: resumed.
pc_paused=""
pc_pause() {
    local node
    for node in $1; do pc_paused+=" $(pc_server_pids "$node")"; done
    # shellcheck disable=SC2086
    kill -STOP $pc_paused 2>/dev/null || true
}
pc_resume() {
    # shellcheck disable=SC2086
    kill -CONT $pc_paused 2>/dev/null || true
    pc_paused=""
}
pc_freeze() { pc_pause "$1"; sleep "$2"; pc_resume; }

pc_cut() { kill -USR1 "$pc_proxy_pid"; }
pc_heal() { kill -USR2 "$pc_proxy_pid"; }

pc_restart() {
    local node=$1
    as_pg patroni "$pc_dir/$node/patroni.yml" >>"$pc_dir/$node/patroni.log" 2>&1 &
}

pc_stop() {
    [[ -n $pc_dir ]] || return 0
    local node
    for node in "${pc_nodes[@]}"; do pc_kill "$node"; done
    pkill -KILL -f -- "--data-dir $pc_dir/etcd" 2>/dev/null || true
    [[ -z ${pc_proxy_pid:-} ]] || kill "$pc_proxy_pid" 2>/dev/null || true
    wait 2>/dev/null || true
}
