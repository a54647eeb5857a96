# pg_pair.sh (sourced): a PostgreSQL primary and a streaming standby of it (pg_basebackup -R)
# on this machine, for scripts/standby_cost.sh and scripts/chaos_failover.sh. As root the
# servers run as the postgres user.
#
#   pg_pair_start DIR   # both up in DIR (owned by postgres); sets pg_bin, primary_port,
#                       # standby_port and pg_admin (a URL to the primary's postgres database)
#   pg_sync async|sync  # the standby named synchronous or not, and seen so by the primary
#   pg_pair_stop        # both stopped (immediate), whatever state they are in

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[[ -n $pg_bin && -x $pg_bin/initdb ]] || pg_bin=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
pg_pair_dir=""
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pg_sql() { psql -qAtX "$pg_admin" -c "$1"; }

pg_pair_start() {
    [[ -x $pg_bin/initdb ]] || { echo "PostgreSQL's server binaries are not installed" >&2; return 2; }
    pg_pair_dir=$1
    ((EUID == 0)) && chown postgres "$pg_pair_dir"
    primary_port=$(free_port)
    standby_port=$(free_port)
    local opts="-k $pg_pair_dir -c listen_addresses=127.0.0.1 -c max_connections=300"
    as_pg "$pg_bin/initdb" -A trust -U postgres -E UTF8 -D "$pg_pair_dir/primary" >/dev/null
    as_pg "$pg_bin/pg_ctl" start -w -D "$pg_pair_dir/primary" -l "$pg_pair_dir/primary.log" \
        -o "-p $primary_port $opts" >/dev/null
    as_pg "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -R -X stream \
        -c fast -D "$pg_pair_dir/standby"
    as_pg "$pg_bin/pg_ctl" start -w -D "$pg_pair_dir/standby" -l "$pg_pair_dir/standby.log" \
        -o "-p $standby_port $opts" >/dev/null
    pg_admin="postgres://postgres@127.0.0.1:$primary_port/postgres"
}

pg_sync() {
    local names="" want=async
    [[ $1 == sync ]] && names='*' && want=sync
    pg_sql "ALTER SYSTEM SET synchronous_standby_names = '$names'" >/dev/null
    pg_sql "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 1 200); do
        [[ $(pg_sql "SELECT sync_state FROM pg_stat_replication") == "$want" ]] && return 0
        sleep 0.05
    done
    echo "the standby did not become $want" >&2
    return 1
}

pg_pair_stop() {
    [[ -n $pg_pair_dir ]] || return 0
    for d in "$pg_pair_dir/standby" "$pg_pair_dir/primary"; do
        [[ -d $d ]] && as_pg "$pg_bin/pg_ctl" stop -m immediate -w -D "$d" >/dev/null 2>&1 || true
    done
}
