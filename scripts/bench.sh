#!/usr/bin/env bash
# Benchmarks the relay against the core simulator with `loadgen`, and writes BENCHMARKS.md.
#
# Every cell gets a fresh core simulator and (for relay cells) a fresh relay with a fresh
# temp ledger, all on 127.0.0.1 with ports picked by the kernel. After each relay cell the
# core's /_stats is checked: no GUID may be booked twice, and loadgen must have seen no
# resend mismatch and no malformed reply. Everything started here is stopped on exit (by
# pid). Needs cargo, bash and python3 (standard library only).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/bench.sh [--quick] [--secs N] [--cells LIST] [--profile] [--out FILE]

  --quick     a smoke run of a few seconds per cell (1 s measured, 0.2 s warm-up, 0.5 s
              idle hold); writes target/bench/BENCHMARKS.quick.md unless --out is given
  --secs N    measured seconds per cell (default 10; warm-up 2 s; idle hold 5 s)
  --cells LIST  run only these cells (comma-separated names as in the report, e.g.
              relay-c1,http-c1,relay-c64,http-c64; `idle`, `drain` and `reconcile` are names too); the
              report then has only their rows and the ratios they give
  --profile   also run prof-relay-c64 and prof-pg-relay-c64: the same as relay-c64 and
              pg-relay-c64, under a system-wide `perf record` (perf from linux-perf; the
              cells are skipped, said so, without it), not counted in any ratio; the report
              gets where each process's CPU went and the relay's and PostgreSQL's hottest
              functions
  --out FILE  where to write the report (default: BENCHMARKS.md at the repository root)
  --help      this text

Builds with `scripts/release_build.sh --all --quiet`, then runs:
  C in {1, 8, 64} x {relay, pg-relay, direct}
                                      resend ratio 0.1 (direct: resend slots are new GUIDs);
                                      pg-relay: the relay on a PostgreSQL ledger (a throwaway
                                      server started here; skipped if PostgreSQL is missing)
  http-c1, http-c64 (--quick: http-c64)
                                      the relay with --http-listen 127.0.0.1:0 and loadgen
                                      --http (JSON POSTs of CONTRACT §9 over kept-alive
                                      HTTP/1.1, the GUID as Idempotency-Key), same SQLite
                                      ledger kind and durations, each right after the TCP
                                      relay cell of the same concurrency; reported as
                                      throughput HTTP ÷ TCP
  tls-c1, tls-c64 (--quick: tls-c64)  the relay with mutual TLS (--tls-cert/--tls-key
                                      --client-ca, certificates made by pkigen) and loadgen
                                      over TLS as channel-a, each right after the plain
                                      relay cell of the same concurrency; reported as
                                      throughput TLS ÷ plain TCP (skipped, said so, if the
                                      relay has no --tls-cert)
  costR-{relay,nohist,nolate}-c64     what history and late replies cost: the relay as is, with
                                      its history triggers dropped, and with --late-reply-ms 0,
                                      back to back in a rotated order, 3 rounds (--quick: 1)
  pg3-c64                             three relays on one PostgreSQL ledger, 64 connections
                                      spread over them
  replay-only, 64 connections         pool of 1000 GUIDs booked first, then only resends
  idle                                1000 idle channel connections held open: relay RSS
                                      before/with, and a probe on a new connection
  drain (not with --quick)            scripts/drain_bench.sh: resolve on 20,000 UNKNOWN rows,
                                      --parallel 1 and 8
  history                             the writer alone, no relay: scripts/history_trigger_cost.py
                                      --guids streams, then random (none, new, newnoguid;
                                      --quick: one round of 640 transfers): µs and WAL pages
                                      per transfer with and without history and its GUID index
  reconcile (not with --quick)        reconcile over a million journal lines and rows (the
                                      ignored test reconcile_million): seconds, peak RSS
Exit status: 0 if every safety check held, 1 if one did not (the report is still written),
2 for a usage error.
EOF
}

quick=0
profile=0
secs=10
cells=""
out=""
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --quick) quick=1 ;;
        --secs) secs=${2:?--secs needs a value}; shift ;;
        --out) out=${2:?--out needs a value}; shift ;;
        --cells) cells=${2:?--cells needs a value}; shift ;;
        --profile) profile=1 ;;
        *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target_dir=${CARGO_TARGET_DIR:-$root/target}
if ((quick)); then
    secs=1 warmup=0.2 hold=0.5
    out=${out:-$target_dir/bench/BENCHMARKS.quick.md}
else
    warmup=2 hold=5
    out=${out:-$root/BENCHMARKS.md}
fi
pool=1000
idle_n=1000
cost_rounds=$((quick ? 1 : 3))
ratio=0.1
command -v python3 >/dev/null || { echo "bench.sh: python3 is needed" >&2; exit 1; }
# want NAME: whether --cells (if given) lists the cell NAME.
want() { [[ -z $cells || ,$cells, == *",$1,"* ]]; }

echo "== building (scripts/release_build.sh --all --quiet)"
bash "$root/scripts/release_build.sh" --all --quiet
bin="$target_dir/release"

# 1000 idle connections cost the relay one descriptor each (it raises its own soft limit),
# loadgen one.
soft=$(ulimit -Sn)
if [[ $soft != unlimited ]] && ((soft < 8192)); then
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 8192 2>/dev/null || true
fi
fd_limit=$(ulimit -Sn)

work=$(mktemp -d)
results="$work/results.jsonl"
: >"$results"
pids=()
failed=0
cleanup() {
    pg_stop
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if ((failed)); then
        echo "bench.sh: logs kept in $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The TLS cells' certificates: a CA, the relay's (localhost, 127.0.0.1), channel-a's.
certs="$work/certs"
tls_cells=(1 64)
((quick)) && tls_cells=(64)
relay_help=$("$bin/relay" --help)
if [[ $relay_help == *--tls-cert* ]]; then
    "$bin/pkigen" "$certs" --client channel-a >/dev/null
    tls_relay=(--tls-cert "$certs/relay.pem" --tls-key "$certs/relay.key" --client-ca "$certs/ca.pem")
    tls_loadgen=(--tls-ca "$certs/ca.pem" --tls-cert "$certs/channel-a.pem" --tls-key "$certs/channel-a.key")
else
    echo "== this relay has no --tls-cert: TLS cells skipped"
    tls_cells=()
fi

# The HTTP cells: the relay with --http-listen, loadgen --http.
http_cells=(1 64)
((quick)) && http_cells=(64)

# start NAME LOG ARGS...: runs a server, waits for `listening on`, sets $addr and $pid.
start() {
    local name=$1 log=$2
    shift 2
    local outf="$log.out"
    : >"$outf"
    "$bin/$name" "$@" >"$outf" 2>"$log" &
    pid=$!
    pids+=("$pid")
    local deadline=$((SECONDS + 30))
    until grep -q '^listening on ' "$outf"; do
        if ((SECONDS > deadline)) || ! kill -0 "$pid" 2>/dev/null; then
            echo "bench.sh: $name did not start:" >&2
            cat "$log" >&2
            failed=1
            exit 1
        fi
        sleep 0.02
    done
    addr=$(sed -n 's/^listening on //p' "$outf" | head -n 1)
}

# stop PID: SIGTERM, wait, forget.
stop() {
    local victim=$1 p keep=()
    kill "$victim" 2>/dev/null || true
    wait "$victim" 2>/dev/null || true
    for p in "${pids[@]}"; do
        [[ $p == "$victim" ]] || keep+=("$p")
    done
    pids=("${keep[@]}")
}

# core_stats ADDR: {"bookings","guids","guids_booked_more_than_once","max_per_guid"}.
core_stats() {
    python3 - "$1" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}/_stats", timeout=60) as r:
    s = json.load(r)
by = s.get("by_guid", {})
dup = [g for g, n in by.items() if n > 1]
print(json.dumps({"bookings": s.get("bookings"), "guids": len(by),
                  "guids_booked_more_than_once": len(dup), "dup_examples": dup[:5],
                  "max_per_guid": max(by.values(), default=0)}))
PY
}

# ledger_states DB: {"DONE": n, ...} (read after the relay stopped: python's sqlite3 for a
# file, psql for a PostgreSQL URL).
ledger_states() {
    if [[ $1 == postgres://* ]]; then
        psql -qAtX "$1" -c "SELECT coalesce(json_object_agg(state, n), '{}') FROM \
            (SELECT state, count(*) AS n FROM tx GROUP BY state) s"
        return
    fi
    python3 - "$1" <<'PY'
import json, sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(json.dumps(dict(c.execute("SELECT state, count(*) FROM tx GROUP BY state"))))
PY
}

# A throwaway PostgreSQL server for the pg cells (as root, run as the postgres user), on a
# free port; sets $pg_base (empty if PostgreSQL is not installed).
pg_base=""
pg_data=""
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[[ -n $pg_bin && -x $pg_bin/initdb ]] || pg_bin=$(dirname "$(command -v initdb 2>/dev/null)" 2>/dev/null || true)
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
    [[ -n $pg_bin && -x $pg_bin/initdb ]] || { echo "== no PostgreSQL installed: pg cells skipped"; return; }
    local dir port
    dir=$(mktemp -d /tmp/bench-pg.XXXXXX)
    ((EUID == 0)) && chown postgres "$dir"
    as_pg "$pg_bin/initdb" -A trust -U postgres -E UTF8 -D "$dir/data" >/dev/null
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_pg "$pg_bin/pg_ctl" start -w -D "$dir/data" -l "$dir/log" \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" >/dev/null
    pg_data="$dir/data"
    pg_base="postgres://postgres@127.0.0.1:$port/postgres"
    echo "== PostgreSQL $("$pg_bin/postgres" -V | awk '{print $3}') on 127.0.0.1:$port (fsync on, synchronous_commit on)"
}
pg_stop() { [[ -z $pg_data ]] || as_pg "$pg_bin/pg_ctl" stop -m immediate -w -D "$pg_data" >/dev/null 2>&1 || true; }
# pg_fresh NAME: a URL to a new, empty schema NAME.
pg_fresh() {
    psql -qAtX "$pg_base" -c "CREATE SCHEMA $1" >/dev/null
    echo "$pg_base?options=-c%20search_path%3D$1"
}

# pg_snap: the server's WAL position (bytes), transactions committed (reads included) and WAL
# syncs (fsyncs) so far, as JSON ({} without a server).
pg_snap() {
    [[ -n $pg_base ]] || { echo '{}'; return; }
    psql -qAtX "$pg_base" -F ' ' -c "SELECT pg_current_wal_lsn() - '0/0', \
        (SELECT sum(xact_commit) FROM pg_stat_database), (SELECT wal_sync FROM pg_stat_wal)" |
        awk '{printf "{\"wal\": %s, \"commits\": %s, \"syncs\": %s}\n", $1, $2, $3}'
}

# pg_delta BEFORE AFTER: WAL bytes and commits between two pg_snap snapshots.
pg_delta() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({k: b[k] - a[k] for k in ("wal", "commits", "syncs")} if a and b else None))
PY
}

# perf_summary DATA RELAY_PID: the profile's split by command and the hottest functions of
# the relay and of PostgreSQL's processes, as JSON (perf report's text, a line each).
perf_summary() {
    local data=$1 relay_pid=$2
    python3 - "$data" "$relay_pid" <<'PY'
import json, subprocess, sys
data, pid = sys.argv[1:]
def report(*args, n=15):
    try:
        out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-q",
                              "--percent-limit", "0.5", *args],
                             capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [l.rstrip() for l in out.splitlines() if l.strip() and not l.startswith("#")][:n]
print(json.dumps({"by_command": report("--sort", "comm", n=12),
                  "relay": report("--pid", pid, "--sort", "dso,sym", n=20),
                  "postgres": report("--comms", "postgres", "--sort", "sym", n=15)}))
PY
}

# vm FIELD PID: a kB figure from /proc/PID/status.
vm() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/status" 2>/dev/null || true; }

# record CELL JSONFILE KEY=JSON...: appends {"cell":…, "result":…, extras} to results.jsonl.
record() {
    python3 - "$@" >>"$results" <<'PY'
import json, sys
cell, path, *extra = sys.argv[1:]
text = open(path).read().strip()
try:
    result = json.loads(text.splitlines()[-1]) if text else None
except ValueError:
    result = None
row = {"cell": cell, "result": result}
for kv in extra:
    k, v = kv.split("=", 1)
    row[k] = json.loads(v) if v else None
print(json.dumps(row))
PY
}

run_loadgen() { # NAME ARGS...: runs loadgen, stdout to $work/NAME.json; sets $cmd, $rc
    local name=$1
    shift
    cmd="loadgen $*"
    echo "   $cmd"
    rc=0
    "$bin/loadgen" "$@" >"$work/$name.json" 2>"$work/$name.loadgen.log" || rc=$?
    if ((rc != 0)); then
        echo "bench.sh: loadgen exited $rc in $name:" >&2
        tail -n 5 "$work/$name.loadgen.log" >&2
    fi
}

json_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }

# relay_log_summary LOG: counts of WARN/ERROR lines and their most frequent messages.
relay_log_summary() {
    python3 - "$1" <<'PY'
import collections, json, re, sys
warn = collections.Counter()
n = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\b(WARN|ERROR)\b\s*(?:\S+\])?\s*(.*)", line)
    if m:
        n += 1
        msg = re.sub(r"\d+", "N", m.group(2))[:120]
        warn[f"{m.group(1)} {msg}"] += 1
print(json.dumps({"warn_error_lines": n, "top": warn.most_common(5)}))
PY
}

# cpu_snap RELAY_PIDS CORE_PID: CPU ticks so far of the relays (comma-separated pids) and of
# each of their threads (by thread id, with its name), the core simulator, every PostgreSQL
# server process, and the whole machine (/proc/stat).
cpu_snap() {
    python3 - "$@" <<'PY'
import json, os, sys
def ticks(path):
    try:
        f = open(f"{path}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, IndexError, ValueError):
        return 0
def comm(path):
    try:
        return open(f"{path}/comm").read().strip()
    except OSError:
        return ""
def threads(pid):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    return {t: [comm(f"/proc/{pid}/task/{t}"), ticks(f"/proc/{pid}/task/{t}")] for t in tids}
relays = [p for p in sys.argv[1].split(",") if p]
pg = {p: ticks(f"/proc/{p}") for p in os.listdir("/proc") if p.isdigit() and comm(f"/proc/{p}") == "postgres"}
cpu = [int(x) for x in open("/proc/stat").readline().split()[1:]]
print(json.dumps({"relay": {p: ticks(f"/proc/{p}") for p in relays},
                  "threads": {t: v for p in relays for t, v in threads(p).items()},
                  "coresim": {sys.argv[2]: ticks(f"/proc/{sys.argv[2]}")}, "postgres": pg,
                  "busy": sum(cpu) - cpu[3] - cpu[4], "all": sum(cpu)}))
PY
}

# cpu_split BEFORE AFTER: each group's share of the machine's CPU time between two snapshots.
cpu_split() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
all_ = (b["all"] - a["all"]) or 1
out = {}
for g in ("relay", "coresim", "postgres"):
    out[g] = sum(t - a[g].get(p, 0) for p, t in b[g].items()) / all_
out["idle"] = 1 - (b["busy"] - a["busy"]) / all_
out["rest"] = max(0.0, 1 - out["idle"] - out["relay"] - out["coresim"] - out["postgres"])
out = {k: round(v, 3) for k, v in out.items()}
# The relays' threads by name (a thread that ended before the second snapshot is not counted).
names = {}
for t, (name, n) in b.get("threads", {}).items():
    names[name] = names.get(name, 0) + n - a.get("threads", {}).get(t, [name, 0])[1]
out["relay_threads"] = {k: round(v / all_, 4) for k, v in sorted(names.items(), key=lambda kv: -kv[1]) if v}
print(json.dumps(out))
PY
}

# ledger_snap ADMIN [BEFORE]: the relay's ledger commits so far, from /metrics on its --admin
# address (commits, statements in them, seconds spent committing, and the time now); with
# BEFORE (an earlier snapshot), what happened since, its wall-clock seconds included. {}
# without an address or an answer.
ledger_snap() {
    python3 - "${1:-}" "${2:-}" <<'PY'
import json, sys, time, urllib.request
out = {}
if sys.argv[1]:
    try:
        with urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=30) as r:
            text = r.read().decode()
        names = {"txrelay_ledger_commit_duration_seconds_count": "commits",
                 "txrelay_ledger_commit_duration_seconds_sum": "seconds",
                 "txrelay_ledger_commit_batch_size_sum": "statements"}
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in names:
                out[names[name]] = float(value)
        out["wall"] = time.time()
    except (OSError, ValueError):
        out = {}
before = json.loads(sys.argv[2]) if sys.argv[2] else None
if before is not None:
    out = {k: round(v - before[k], 6) for k, v in out.items() if k in before}
print(json.dumps(out))
PY
}

# cell NAME MODE CONNS LOADGEN-ARGS...
cell() {
    local name=$1 mode=$2 conns=$3
    shift 3
    want "$name" || return 0
    echo "== $name"
    start coresim "$work/$name.core.log" --listen 127.0.0.1:0
    local core=$addr core_pid=$pid
    local prefix
    prefix="B$(date +%s)-$name"
    prefix=${prefix:0:22}
    if [[ $mode == direct ]]; then
        local direct_before
        direct_before=$(cpu_snap "" "$core_pid")
        run_loadgen "$name" --direct --core "http://$core" --connections "$conns" \
            --duration-secs "$secs" --warmup-secs "$warmup" --resend-ratio "$ratio" \
            --seed "$RANDOM" --guid-prefix "$prefix" "$@"
        local lrc=$rc lcmd=$cmd
        ((lrc != 3)) || failed=1 # a malformed answer from the core
        local direct_cpu
        direct_cpu=$(cpu_split "$direct_before" "$(cpu_snap "" "$core_pid")")
        stop "$core_pid"
        record "$name" "$work/$name.json" "mode=\"$mode\"" "connections=$conns" \
            "loadgen_rc=$lrc" "command=$(json_str "$lcmd")" "cpu=$direct_cpu"
        return
    fi
    local db="$work/$name.db" relay_args=()
    case $mode in
        pg-relay) db=$(pg_fresh "b_${name//-/_}") ;;
        nolate) relay_args=(--late-reply-ms 0) ;;
        tls) relay_args=("${tls_relay[@]}") ;;
        http) relay_args=(--http-listen 127.0.0.1:0) ;;
        nohist) # the relay creates the ledger; then its history triggers are dropped
            start relay "$work/$name.prep.log" --db "$db" --listen 127.0.0.1:0 --core "http://$core"
            stop "$pid"
            python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'tx'").fetchall():
    c.execute(f"DROP TRIGGER {t}")
c.commit()
PY
            ;;
    esac
    start relay "$work/$name.relay.log" --db "$db" --listen 127.0.0.1:0 --core "http://$core" \
        --admin 127.0.0.1:0 "${relay_args[@]}"
    local relay=$addr relay_pid=$pid cpu_before cpu door=() admin ledger_before ledger
    admin=$(grep -o 'admin listening on [0-9.:]*' "$work/$name.relay.log" | head -n 1 | cut -d' ' -f4)
    if [[ $mode == http ]]; then # `http listening on` follows `listening on`
        local deadline=$((SECONDS + 30))
        until grep -q '^http listening on ' "$work/$name.relay.log.out"; do
            if ((SECONDS > deadline)) || ! kill -0 "$relay_pid" 2>/dev/null; then
                echo "bench.sh: relay printed no 'http listening on':" >&2
                cat "$work/$name.relay.log" >&2
                failed=1
                exit 1
            fi
            sleep 0.02
        done
        relay=$(sed -n 's/^http listening on //p' "$work/$name.relay.log.out" | head -n 1)
        door=(--http)
    fi
    local pg_before="{}" pg="null" perf_pid="" prof="null"
    [[ $mode != pg-relay ]] || pg_before=$(pg_snap)
    if [[ $name == prof-* ]]; then
        perf record -a -F 499 -o "$work/$name.perf.data" -- sleep "$secs" \
            >"$work/$name.perf.log" 2>&1 &
        perf_pid=$!
    fi
    ledger_before=$(ledger_snap "$admin")
    cpu_before=$(cpu_snap "$relay_pid" "$core_pid")
    run_loadgen "$name" "${door[@]}" --relay "$relay" --connections "$conns" \
        --duration-secs "$secs" --warmup-secs "$warmup" --resend-ratio "$ratio" \
        --seed "$RANDOM" --guid-prefix "$prefix" "$@"
    local lrc=$rc lcmd=$cmd
    if [[ -n $perf_pid ]]; then
        wait "$perf_pid" || true
        prof=$(perf_summary "$work/$name.perf.data" "$relay_pid")
    fi
    cpu=$(cpu_split "$cpu_before" "$(cpu_snap "$relay_pid" "$core_pid")")
    ledger=$(ledger_snap "$admin" "$ledger_before")
    [[ $mode != pg-relay ]] || pg=$(pg_delta "$pg_before" "$(pg_snap)")
    local hwm threads
    hwm=$(vm VmHWM "$relay_pid")
    threads=$(vm Threads "$relay_pid")
    stop "$relay_pid"
    local stats states logsum
    stats=$(core_stats "$core")
    stop "$core_pid"
    states=$(ledger_states "$db")
    logsum=$(relay_log_summary "$work/$name.relay.log")
    [[ $db == postgres://* ]] || rm -f "$db" "$db-wal" "$db-shm"
    record "$name" "$work/$name.json" "mode=\"$mode\"" "connections=$conns" \
        "loadgen_rc=$lrc" "command=$(json_str "$lcmd")" "core=$stats" \
        "ledger=$states" "relay_vmhwm_kb=${hwm:-null}" "relay_threads_at_end=${threads:-null}" \
        "relay_log=$logsum" "cpu=$cpu" "ledger_commits=$ledger" "pg=$pg" "profile=$prof"
    python3 - "$work/$name.json" "$stats" <<'PY' || failed=1
import json, sys
text = open(sys.argv[1]).read().strip()
r = json.loads(text.splitlines()[-1]) if text else {}
s = json.loads(sys.argv[2])
bad = []
if s["guids_booked_more_than_once"]:
    bad.append(f"{s['guids_booked_more_than_once']} GUIDs booked more than once {s['dup_examples']}")
if r.get("resend_mismatches", 1):
    bad.append(f"resend_mismatches={r.get('resend_mismatches')}")
if r.get("malformed_replies", 1):
    bad.append(f"malformed_replies={r.get('malformed_replies')}")
print(f"   {r.get('throughput_rps')} rps, p50 {r.get('latency_ms', {}).get('p50')} ms, "
      f"codes {r.get('replies_by_code')}, core bookings {s['bookings']}, "
      f"GUIDs booked >1: {s['guids_booked_more_than_once']}")
if bad:
    print("   SAFETY CHECK FAILED: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
}

# multi_cell NAME N CONNS: N relays on one PostgreSQL ledger, one loadgen per relay (CONNS
# spread over them) run at the same time; the cell's figures are their sums.
multi_cell() {
    local name=$1 n=$2 conns=$3 i
    want "$name" || return 0
    echo "== $name"
    start coresim "$work/$name.core.log" --listen 127.0.0.1:0
    local core=$addr core_pid=$pid url relays=() relay_pids=() lpids=()
    url=$(pg_fresh "b_${name//-/_}")
    for ((i = 0; i < n; i++)); do
        start relay "$work/$name.relay$i.log" --db "$url" --listen 127.0.0.1:0 --core "http://$core"
        relays+=("$addr") relay_pids+=("$pid")
    done
    local prefix
    prefix="B$(date +%s)-$name"
    prefix=${prefix:0:18}
    cmd=""
    local cpu_before cpu all_relays
    all_relays=$(IFS=,; echo "${relay_pids[*]}")
    local pg_before
    pg_before=$(pg_snap)
    cpu_before=$(cpu_snap "$all_relays" "$core_pid")
    for ((i = 0; i < n; i++)); do
        local c=$((conns / n + (i < conns % n ? 1 : 0)))
        local args=(--relay "${relays[$i]}" --connections "$c" --duration-secs "$secs"
            --warmup-secs "$warmup" --resend-ratio "$ratio" --seed "$RANDOM" --guid-prefix "$prefix-$i")
        cmd+="loadgen ${args[*]} & "
        "$bin/loadgen" "${args[@]}" >"$work/$name.$i.json" 2>"$work/$name.$i.loadgen.log" &
        lpids+=("$!")
    done
    echo "   $cmd"
    local lrc=0
    for i in "${lpids[@]}"; do wait "$i" || lrc=$?; done
    cpu=$(cpu_split "$cpu_before" "$(cpu_snap "$all_relays" "$core_pid")")
    local pg
    pg=$(pg_delta "$pg_before" "$(pg_snap)")
    for i in "${relay_pids[@]}"; do stop "$i"; done
    local stats states
    stats=$(core_stats "$core")
    stop "$core_pid"
    states=$(ledger_states "$url")
    python3 - "$work/$name.json" "$work/$name".[0-9]*.json <<'PY'
import json, sys
rs = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[2:]]
codes = {}
for r in rs:
    for k, v in (r.get("replies_by_code") or {}).items():
        codes[k] = codes.get(k, 0) + v
out = {k: sum(r.get(k) or 0 for r in rs) for k in
       ("requests", "throughput_rps", "resends", "errors", "resend_mismatches", "malformed_replies")}
out["replies_by_code"] = codes
out["latency_ms"] = {p: max((r.get("latency_ms") or {}).get(p) or 0 for r in rs)
                     for p in ("p50", "p90", "p99", "p999", "max")}
out["note"] = "latency: the worst of the loadgens' percentiles"
open(sys.argv[1], "w").write(json.dumps(out))
PY
    record "$name" "$work/$name.json" "mode=\"pg3\"" "connections=$conns" \
        "loadgen_rc=$lrc" "command=$(json_str "$cmd")" "core=$stats" "ledger=$states" \
        "relay_log=$(relay_log_summary "$work/$name.relay0.log")" "cpu=$cpu" "pg=$pg"
    python3 - "$stats" "$work/$name.json" <<'PY' || failed=1
import json, sys
s, r = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
print(f"   {r['throughput_rps']:.0f} rps over all relays, codes {r['replies_by_code']}, "
      f"GUIDs booked >1: {s['guids_booked_more_than_once']}")
sys.exit(1 if s["guids_booked_more_than_once"] or r["resend_mismatches"] or r["malformed_replies"] else 0)
PY
}

started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [[ -z $cells || $cells == *pg* ]]; then pg_start; fi
for c in 1 8 64; do
    cell "relay-c$c" relay "$c"
    [[ " ${http_cells[*]} " != *" $c "* ]] || cell "http-c$c" http "$c"
    [[ " ${tls_cells[*]} " != *" $c "* ]] || cell "tls-c$c" tls "$c" "${tls_loadgen[@]}"
    [[ -z $pg_base ]] || cell "pg-relay-c$c" pg-relay "$c"
    cell "direct-c$c" direct "$c"
done
# What history and late replies cost: the three relays back to back, in a rotated order each
# round (so a machine that slows down during the run does not favour one of them); the report
# takes each round's ratios and their median.
modes=(relay nohist nolate)
for ((r = 1; r <= cost_rounds; r++)); do
    for ((i = 0; i < 3; i++)); do
        m=${modes[$(((i + r - 1) % 3))]}
        cell "cost$r-$m-c64" "$m" 64
    done
done
[[ -z $pg_base ]] || multi_cell "pg3-c64" 3 64
cell "replay-c64" replay 64 --replay-only --pool "$pool"
if ((profile)); then
    if command -v perf >/dev/null; then
        cell "prof-relay-c64" relay 64
        [[ -z $pg_base ]] || cell "prof-pg-relay-c64" pg-relay 64
    else
        echo "== no perf here (Debian: linux-perf): the prof cells skipped"
    fi
fi

drain_out="$work/drain.txt"
: >"$drain_out"
if ((!quick)) && want drain; then
    echo "== drain (scripts/drain_bench.sh --rows 20000 --parallel \"1 8\")"
    bash scripts/drain_bench.sh --rows 20000 --parallel "1 8" | tee "$drain_out" || failed=1
fi

# The writer alone (no relay, Python's sqlite3): what the history triggers write per transfer,
# with the bench's GUIDs (streams) and with random ones, and what the GUID index is of it.
history_out="$work/history.txt"
: >"$history_out"
if want history; then
    hargs=(--rounds 3 --purge-rows 0 --only none,new,newnoguid)
    ((quick)) && hargs=(--rounds 1 --transfers 640 --purge-rows 0 --only none,new,newnoguid)
    for g in streams random; do
        echo "== history (python3 scripts/history_trigger_cost.py ${hargs[*]} --guids $g)"
        python3 scripts/history_trigger_cost.py "${hargs[@]}" --guids "$g" | tee -a "$history_out" || failed=1
    done
fi

reconcile_out="$work/reconcile.txt"
: >"$reconcile_out"
if ((!quick)) && want reconcile; then
    echo "== reconcile (a million journal lines against a million rows: tests/e2e/reconcile_million.rs)"
    RECONCILE_BIN="$bin/reconcile" cargo test --quiet --test e2e reconcile_million -- --ignored --nocapture 2>&1 |
        grep -E '^(a million|reconcile over)' | tee "$reconcile_out" || failed=1
    [[ -s $reconcile_out ]] || failed=1
fi

if want idle; then
    echo "== idle"
    start coresim "$work/idle.core.log" --listen 127.0.0.1:0
    idle_core=$addr idle_core_pid=$pid
    # All from 127.0.0.1: the idle connections, the probe on a new connection while they are
    # held, and a margin for the warm-up probe's connection until the relay has seen it close.
    start relay "$work/idle.relay.log" --db "$work/idle.db" --listen 127.0.0.1:0 \
        --core "http://$idle_core" --max-connections-per-peer "$((idle_n + 2))"
    idle_relay=$addr idle_relay_pid=$pid
    run_loadgen idle --relay "$idle_relay" --idle "$idle_n" --hold-secs "$hold" \
        --rss-pid "$idle_relay_pid" --guid-prefix "B$(date +%s)-idle"
    idle_rc=$rc idle_cmd=$cmd
    stop "$idle_relay_pid"
    idle_stats=$(core_stats "$idle_core")
    stop "$idle_core_pid"
    record idle "$work/idle.json" "mode=\"idle\"" "connections=$idle_n" "loadgen_rc=$idle_rc" \
        "command=$(json_str "$idle_cmd")" "core=$idle_stats" \
        "relay_log=$(relay_log_summary "$work/idle.relay.log")"
    ((idle_rc == 0)) || failed=1
    python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])["guids_booked_more_than_once"] > 0)' \
        "$idle_stats" || failed=1
    cat "$work/idle.json"
fi

# ---- the report ----
mkdir -p "$(dirname "$out")"
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)
BENCH_NPROC=$(nproc) BENCH_CPU=${cpu:-unknown} BENCH_MEM=$mem BENCH_KERNEL=$(uname -sr) \
BENCH_RUSTC=$(rustc -V) BENCH_DATE=$started_at BENCH_SECS=$secs BENCH_WARMUP=$warmup \
BENCH_HOLD=$hold BENCH_QUICK=$quick BENCH_CELLS=$cells BENCH_DRAIN=$drain_out BENCH_RECONCILE=$reconcile_out BENCH_HISTORY=$history_out BENCH_FDS=$fd_limit BENCH_RATIO=$ratio BENCH_POOL=$pool BENCH_COST_ROUNDS=$cost_rounds \
BENCH_GIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty) \
python3 - "$results" "$out" <<'PY' || failed=1
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {r["cell"]: r for r in rows}
E = os.environ
def res(cell): return (by.get(cell) or {}).get("result") or {}
def lat(cell, p): return res(cell).get("latency_ms", {}).get(p)
def fmt(v, d=2):
    return "n/a" if v is None else (f"{v:,.{d}f}" if isinstance(v, float) else f"{v:,}")
def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"

L = []
w = L.append
quick = E["BENCH_QUICK"] == "1"
w("# Benchmarks")
w("")
w("Generated by `bash scripts/bench.sh" + (" --quick" if quick else "")
  + (f" --cells {E['BENCH_CELLS']}" if E.get("BENCH_CELLS") else "") + "`; do not edit by hand."
  + (" **Quick smoke run: the figures are too short to quote.**" if quick else ""))
if E.get("BENCH_CELLS"):
    w("")
    w(f"**Only the cells {', '.join(E['BENCH_CELLS'].split(','))} were run (`--cells`); the ratios "
      "below that need other cells say n/a.**")
w("")
w("## Machine")
w("")
w(f"- CPUs: {E['BENCH_NPROC']} x {E['BENCH_CPU']}")
w(f"- memory: {E['BENCH_MEM']}; kernel: {E['BENCH_KERNEL']}")
w(f"- {E['BENCH_RUSTC']}; release build of commit {E['BENCH_GIT']}")
w(f"- date (UTC): {E['BENCH_DATE']}; open-file limit during the run: {E['BENCH_FDS']}")
w("- loadgen, relay and core simulator share the same machine (loopback), so every cell "
  "measures the three of them competing for the same CPUs.")
w("")
w("## Method")
w("")
w(f"- Closed loop: each connection sends one request and waits for its reply. "
  f"{E['BENCH_WARMUP']} s warm-up (unmeasured), then {E['BENCH_SECS']} s measured per cell.")
w(f"- relay cells: new transfers, and with probability {E['BENCH_RATIO']} a byte-identical resend "
  "of a GUID that connection already got a reply for. direct cells: the same load as JSON POSTs "
  "straight to the core simulator over keep-alive HTTP/1.1 (one connection per loadgen "
  "connection); the core is not idempotent, so resend slots are POSTs of new GUIDs there.")
w(f"- replay-only: {E['BENCH_POOL']} GUIDs booked first (unmeasured), then every measured request "
  "is a resend of one of them (answered from the ledger, core not called).")
w("- Every cell has a fresh core simulator and, for relay cells, a fresh relay with a fresh temp "
  "ledger (default flags, `RUST_LOG` unset, so the relay logs one INFO line per request to a file).")
w("- Every reply is validated (4-digit prefix, reply codec, GUID of the request, 45-byte body "
  "with `0000`); a resend of a GUID answered `0000` must get the same bytes again.")
w("- Latency: every sample kept in microseconds, nearest-rank percentiles.")
w("")
w("## Results")
w("")
w("| cell | conns | requests | throughput (req/s) | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms "
  "| replies by code | resends | errors | GUIDs booked >1 | relay peak RSS |")
w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
order = [c for c in ("relay-c1", "http-c1", "tls-c1", "pg-relay-c1", "direct-c1", "relay-c8", "pg-relay-c8",
                     "direct-c8", "relay-c64", "http-c64", "tls-c64", "pg-relay-c64", "direct-c64", "pg3-c64",
                     "replay-c64") if c in by]
order += [c for c in by if c.startswith("cost")]  # in the order they ran
order += [c for c in by if c.startswith("prof-")]
for c in order:
    r, row = res(c), by[c]
    codes = ", ".join(f"{k}: {v:,}" for k, v in (r.get("replies_by_code") or {}).items()) or "-"
    dup = (row.get("core") or {}).get("guids_booked_more_than_once")
    hwm = row.get("relay_vmhwm_kb")
    w(f"| {c} | {row['connections']} | {fmt(r.get('requests'))} | {fmt(r.get('throughput_rps'), 0)} "
      f"| {fmt(lat(c, 'p50'))} | {fmt(lat(c, 'p90'))} | {fmt(lat(c, 'p99'))} | {fmt(lat(c, 'p999'))} "
      f"| {fmt(lat(c, 'max'))} | {codes} | {fmt(r.get('resends'))} | {fmt(r.get('errors'))} "
      f"| {'-' if dup is None else dup} | {'-' if hwm is None else f'{hwm / 1024:.1f} MiB'} |")
w("")
w("## Relay against direct, measured in the same run")
w("")
t64, d64 = res("relay-c64").get("throughput_rps"), res("direct-c64").get("throughput_rps")
rp = res("replay-c64").get("throughput_rps")
w("| figure | value |")
w("|---|---:|")
for c in (1, 8, 64):
    a, b = res(f"relay-c{c}").get("throughput_rps"), res(f"direct-c{c}").get("throughput_rps")
    w(f"| throughput relay ÷ direct, {c} conn{'s' if c > 1 else ''} | {ratio(a, b)} |")
p_r, p_d = lat("relay-c1", "p50"), lat("direct-c1", "p50")
diff = None if p_r is None or p_d is None else p_r - p_d
w(f"| p50 latency relay − direct, 1 conn | {fmt(diff, 3)} ms ({fmt(p_r, 3)} vs {fmt(p_d, 3)}) |")
w(f"| throughput replay-only (relay, 64 conns) ÷ direct (64 conns) | {ratio(rp, d64)} |")
w("")
w("## HTTP against TCP, measured in the same run")
w("")
if any(c.startswith("http-") for c in by):
    w("The relay with `--http-listen 127.0.0.1:0` beside its TCP listener, loadgen `--http`: the "
      "same transfers as JSON `POST /v1/transfers` (CONTRACT §9) over kept-alive HTTP/1.1, one "
      "connection per loadgen connection, the GUID as the `Idempotency-Key`, a resend's 200 "
      "checked to carry the first body again; SQLite ledger, same durations, right after the TCP "
      "cell of the same concurrency. Aim: at least 0.8 at 64 connections.")
    w("")
    w("| figure | value |")
    w("|---|---:|")
    for c in (1, 64):
        if f"http-c{c}" in by:
            a, b = res(f"http-c{c}").get("throughput_rps"), res(f"relay-c{c}").get("throughput_rps")
            w(f"| HTTP ÷ TCP throughput at {c} connection{'s' if c > 1 else ''} | {ratio(a, b)} |")
    for c in (1, 64):
        p_h, p_t = lat(f"http-c{c}", "p50"), lat(f"relay-c{c}", "p50")
        if p_h is not None and p_t is not None:
            w(f"| p50 latency HTTP − TCP, {c} conn{'s' if c > 1 else ''} | {fmt(p_h - p_t, 3)} ms "
              f"({fmt(p_h, 3)} vs {fmt(p_t, 3)}) |")
else:
    w("- No HTTP cells in this run.")
w("")
w("## TLS against plain TCP, measured in the same run")
w("")
if any(c.startswith("tls-") for c in by):
    w("The relay with `--tls-cert`/`--tls-key` and `--client-ca` (mutual TLS; every connection "
      "shows channel-a's certificate, so every row is claimed for that channel), loadgen over "
      "TLS with kept-alive connections (one handshake per connection, before the measured "
      "window), right after the plain TCP cell of the same concurrency. Aim: at least 0.75 at "
      "64 connections.")
    w("")
    w("| figure | value |")
    w("|---|---:|")
    for c in (1, 64):
        if f"tls-c{c}" in by:
            a, b = res(f"tls-c{c}").get("throughput_rps"), res(f"relay-c{c}").get("throughput_rps")
            w(f"| throughput TLS ÷ plain TCP, {c} conn{'s' if c > 1 else ''} | {ratio(a, b)} |")
    for c in (1, 64):
        p_t, p_p = lat(f"tls-c{c}", "p50"), lat(f"relay-c{c}", "p50")
        if p_t is not None and p_p is not None:
            w(f"| p50 latency TLS − plain TCP, {c} conn{'s' if c > 1 else ''} | {fmt(p_t - p_p, 3)} ms "
              f"({fmt(p_t, 3)} vs {fmt(p_p, 3)}) |")
else:
    w("- The relay of this build has no `--tls-cert`: no TLS cells.")
w("")
w("## PostgreSQL against SQLite, measured in the same run")
w("")
if "pg-relay-c64" in by:
    w("| figure | value |")
    w("|---|---:|")
    for c in (1, 8, 64):
        a, b = res(f"pg-relay-c{c}").get("throughput_rps"), res(f"relay-c{c}").get("throughput_rps")
        w(f"| throughput relay on PostgreSQL ÷ relay on SQLite, {c} conn{'s' if c > 1 else ''} | {ratio(a, b)} |")
    m = res("pg3-c64").get("throughput_rps")
    w(f"| throughput three relays on one PostgreSQL (64 conns in all) ÷ one relay on SQLite (64) | {ratio(m, t64)} |")
    w(f"| throughput three relays on one PostgreSQL ÷ one relay on PostgreSQL (64) | {ratio(m, res('pg-relay-c64').get('throughput_rps'))} |")
else:
    w("- PostgreSQL is not installed here: no pg cells.")
w("")
w("## Where the time goes")
w("")
w("Each process group's share of the machine's CPU time during the cell (warm-up and measured "
  "seconds, from /proc), and the CPU milliseconds it spent per transfer (share × CPUs ÷ "
  "throughput). \"rest\" is mostly loadgen and the kernel's own threads.")
w("")
w("| cell | req/s | relay | PostgreSQL server | core simulator | rest | idle | CPU ms per transfer: relay, PostgreSQL, all |")
w("|---|---:|---:|---:|---:|---:|---:|---|")
ncpu = int(E["BENCH_NPROC"])
def per_tx(share, rps):
    return None if not rps or share is None else share * ncpu * 1000 / rps
for c in [c for c in ("relay-c1", "http-c1", "tls-c1", "pg-relay-c1", "relay-c64", "http-c64",
                      "tls-c64", "pg-relay-c64",
                      "pg3-c64") if c in by]:
    u, rps = by[c].get("cpu") or {}, res(c).get("throughput_rps")
    if not u:
        continue
    pct = lambda k: f"{100 * u.get(k, 0):.0f} %"
    busy = 1 - u.get("idle", 0)
    w(f"| {c} | {fmt(rps, 0)} | {pct('relay')} | {pct('postgres')} | {pct('coresim')} | {pct('rest')} "
      f"| {pct('idle')} | {fmt(per_tx(u.get('relay'), rps), 3)}, {fmt(per_tx(u.get('postgres'), rps), 3)}, "
      f"{fmt(per_tx(busy, rps), 3)} |")
u, us = (by.get("pg-relay-c64") or {}).get("cpu"), (by.get("relay-c64") or {}).get("cpu")
if u and us:
    rp, rs = res("pg-relay-c64").get("throughput_rps"), res("relay-c64").get("throughput_rps")
    all_p, all_s = per_tx(1 - u.get("idle", 0), rp), per_tx(1 - us.get("idle", 0), rs)
    w("")
    busy_p, busy_s = 1 - u.get("idle", 0), 1 - us.get("idle", 0)
    w(f"- At 64 connections the machine is {100 * busy_p:.0f} % busy on PostgreSQL and "
      f"{100 * busy_s:.0f} % on SQLite; a transfer costs {fmt(all_p, 3)} ms of CPU in all on PostgreSQL "
      f"against {fmt(all_s, 3)} ms on SQLite (ratio {ratio(all_s, all_p)}; throughput ratio {ratio(rp, rs)})"
      + (": both busy, so throughput follows that cost." if min(busy_p, busy_s) >= 0.85 else
         ". Where a cell leaves CPU idle, something other than CPU limits it: on SQLite, the one "
         "writer thread (the next section)."))
    w(f"- Of that, the PostgreSQL server takes {fmt(per_tx(u.get('postgres'), rp), 3)} ms per transfer: the "
      "claim's `INSERT … SELECT FROM unnest … ON CONFLICT DO NOTHING` and the result's guarded "
      "`UPDATE … FROM unnest`, each group-committed (many transfers per statement and commit, "
      "see the table below), with their history triggers; on SQLite that work is function calls "
      "inside the relay.")
    w(f"- The relay itself: {fmt(per_tx(u.get('relay'), rp), 3)} ms per transfer on PostgreSQL against "
      f"{fmt(per_tx(us.get('relay'), rs), 3)} ms on SQLite (the SQLite work included); each batch is "
      "handed to a pooled connection's own thread (so that a server that stops answering can be "
      "abandoned at the deadline), and loopback TCP to the server shows in \"rest\".")
    w("- Here the server, the relays, the simulator and loadgen share 2 CPUs: more relays add no CPU.")
w("")
pg_cells = [c for c in ("pg-relay-c1", "pg-relay-c8", "pg-relay-c64", "pg3-c64") if (by.get(c) or {}).get("pg")]
if pg_cells:
    w("PostgreSQL's own counters over each pg cell (warm-up included: `pg_current_wal_lsn()`, "
      "`pg_stat_database.xact_commit` over every database — reads are transactions too — and "
      "`pg_stat_wal.wal_sync`, the WAL flushes), per transfer the core booked in the cell (warm-up "
      "included too; each is one claim and one result; resends write nothing):")
    w("")
    w("| cell | bookings | transactions per transfer | WAL flushes per transfer | WAL bytes per transfer |")
    w("|---|---:|---:|---:|---:|")
    for c in pg_cells:
        g, n = by[c]["pg"], (by[c].get("core") or {}).get("bookings")
        per = lambda v: None if not n else v / n
        w(f"| {c} | {fmt(n, 0)} | {fmt(per(g['commits']), 3)} | {fmt(per(g['syncs']), 3)} | {fmt(per(g['wal']), 0)} |")
    w("")
# The relays' threads and the ledger's commits (single-relay cells at 64 connections).
def thread_ms(c, names):
    """CPU ms per transfer of the relay's threads whose name starts with one of `names`; "conn"
    is the relay's CPU less every thread still alive at the end (the connection threads end
    with loadgen's connections, before the second snapshot, and only the process keeps their
    time)."""
    u = (by.get(c) or {}).get("cpu") or {}
    t = u.get("relay_threads") or {}
    if not t:
        return None
    share = sum(v for k, v in t.items() if k.startswith(names) and k != "conn")
    if "conn" in names:
        share += max(0.0, u.get("relay", 0) - sum(v for k, v in t.items() if k != "conn"))
    return per_tx(share, res(c).get("throughput_rps"))
def commits(c):
    """(commits per transfer, statements per commit, commit time ÷ wall time, ms per commit),
    from /metrics."""
    g, n = (by.get(c) or {}).get("ledger_commits") or {}, ((by.get(c) or {}).get("core") or {}).get("bookings")
    if not g.get("commits") or not n or not g.get("wall"):
        return None, None, None, None
    return g["commits"] / n, g["statements"] / g["commits"], g["seconds"] / g["wall"], 1000 * g["seconds"] / g["commits"]
thread_cells = [c for c in by if c.endswith("-c64") and not c.startswith(("direct", "pg3", "replay", "prof"))
                and ((by[c].get("cpu") or {}).get("relay_threads"))]
if thread_cells:
    w("## The relay's threads and the ledger's commits")
    w("")
    w("The relay's CPU per transfer by thread (from `/proc/PID/task`, over the same seconds as above): "
      "the connection threads (`conn`, one per channel connection: frames, the core call, the log "
      "line; counted as the process's CPU less that of the threads still alive at the end, since "
      "they end with loadgen's connections: the few other threads, accept and admin, are in "
      "it too) and the ledger's threads (`ledger-writer`, the SQLite group commit; `ledger-pg*`, "
      "the PostgreSQL pool's and batch writers' threads; `ledger-checkpoint`); then the ledger's commits "
      "(`txrelay_ledger_commit_*` on the relay's `--admin` port, read before and after the cell): "
      "per transfer booked, statements per commit, and the time spent committing ÷ the cell's "
      "wall-clock time. On SQLite one thread commits, so a figure near 1 means the writer is "
      "never idle and is what limits the cell; on PostgreSQL several batches commit at once.")
    w("")
    w("| cell | req/s | idle | relay CPU ms per transfer: connection threads, ledger threads | commits per transfer | statements per commit | ms per commit | commit time ÷ wall |")
    w("|---|---:|---:|---|---:|---:|---:|---:|")
    for c in thread_cells:
        rps_c = res(c).get("throughput_rps")
        u = by[c].get("cpu") or {}
        conn, led = thread_ms(c, ("conn",)), thread_ms(c, ("ledger",))
        k, b, o, d = commits(c)
        w(f"| {c} | {fmt(rps_c, 0)} | {100 * u.get('idle', 0):.0f} % | {fmt(conn, 3)}, {fmt(led, 3)} "
          f"| {fmt(k, 3)} | {fmt(b, 1)} | {fmt(d, 2)} | {fmt(o, 2)} |")
    w("")
w("## What history and late replies cost, measured in the same run")
w("")
w("| figure | value |")
w("|---|---:|")
def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None
def cost_ratios(mode):
    out = []
    for n in range(1, int(E["BENCH_COST_ROUNDS"]) + 1):
        a, b = res(f"cost{n}-relay-c64").get("throughput_rps"), res(f"cost{n}-{mode}-c64").get("throughput_rps")
        if a and b:
            out.append(a / b)
    return out
for mode, what in (("nohist", "with history ÷ with its triggers dropped"),
                   ("nolate", "with late replies (default) ÷ --late-reply-ms 0")):
    rs = cost_ratios(mode)
    med = median(rs)
    each = ", ".join(f"{x:.2f}" for x in rs) or "-"
    w(f"| throughput {what}, 64 conns: median of {len(rs)} round{'s' if len(rs) != 1 else ''} (each round) "
      f"| {fmt(med)} ({each}) |")
w("")
w("## Issue 22's aims at 64 connections, measured in this run")
w("")
w("| aim | measured | met |")
w("|---|---:|---|")
def aim(what, v, ok, d=2):
    w(f"| {what} | {fmt(v, d)} | {'n/a' if v is None else ('yes' if ok(v) else '**no**')} |")
def rps(c):
    return res(c).get("throughput_rps")
def quot(a, b):
    return a / b if a and b else None
pgu = (by.get("pg-relay-c64") or {}).get("cpu") or {}
hist = cost_ratios("nohist")
aim("relay on PostgreSQL ÷ relay on SQLite ≥ 0.7", quot(rps("pg-relay-c64"), rps("relay-c64")), lambda v: v >= 0.7)
aim("PostgreSQL server CPU ms per transfer ≤ 0.2 (one relay)",
    per_tx(pgu.get("postgres"), rps("pg-relay-c64")) if pgu else None, lambda v: v <= 0.2, 3)
aim("three relays on one PostgreSQL ÷ one relay on PostgreSQL ≥ 1.2", quot(rps("pg3-c64"), rps("pg-relay-c64")),
    lambda v: v >= 1.2)
aim("SQLite: with history ÷ without its triggers ≥ 0.9 (median of the rounds)",
    median(hist), lambda v: v >= 0.9)
aim("SQLite relay ÷ direct (no relay) ≥ 0.3", quot(rps("relay-c64"), rps("direct-c64")), lambda v: v >= 0.3)
w("")
def busy(c):
    u = (by.get(c) or {}).get("cpu")
    return None if not u else 1 - u.get("idle", 0)
def pct(v):
    return "n/a" if v is None else f"{100 * v:.0f} %"
why = []
m3 = quot(rps("pg3-c64"), rps("pg-relay-c64"))
g1, g3 = (by.get("pg-relay-c64") or {}).get("pg"), (by.get("pg3-c64") or {}).get("pg")
u3 = (by.get("pg3-c64") or {}).get("cpu") or {}
if m3 is not None and m3 < 1.2 and g1 and g3 and u3:
    n1, n3 = (by["pg-relay-c64"].get("core") or {}).get("bookings"), (by["pg3-c64"].get("core") or {}).get("bookings")
    why.append(
        f"**Three relays ÷ one ({m3:.2f})**: the machine is {pct(busy('pg3-c64'))} busy in the three-relay cell "
        f"({pct(busy('pg-relay-c64'))} with one), so three relays share the CPU one relay already used; and "
        f"they cut the same load into three sets of smaller batches: {fmt(quot(g3['commits'], n3), 3)} "
        f"server transactions per transfer against {fmt(quot(g1['commits'], n1), 3)}, "
        f"{fmt(per_tx(u3.get('postgres'), rps('pg3-c64')), 3)} ms of server CPU per transfer against "
        f"{fmt(per_tx(pgu.get('postgres'), rps('pg-relay-c64')), 3)}, and "
        f"{fmt(per_tx(u3.get('relay'), rps('pg3-c64')), 3)} ms of relay CPU against "
        f"{fmt(per_tx(pgu.get('relay'), rps('pg-relay-c64')), 3)}. More relays add throughput only "
        "where each has CPU of its own (docs/sizing.md).")
def history_cost():
    """The writer-alone figures (history_trigger_cost.py): {guids: {variant: (µs, WAL pages)}}."""
    import re
    out, g = {}, None
    for l in (open(E["BENCH_HISTORY"]).read().splitlines() if E.get("BENCH_HISTORY") else []):
        h = re.search(r"GUIDs (\w+)$", l)
        m = re.match(r"(\w+)\s+([\d.]+) µs/transfer, median [\d.]+,\s+([\d.]+) WAL pages/transfer", l)
        if h:
            g = h.group(1)
        elif m and g:
            out.setdefault(g, {})[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return out
def history_why():
    hc = history_cost()
    parts = []
    for g, what in (("streams", "the bench's GUIDs"), ("random", "random GUIDs")):
        v = hc.get(g, {})
        if all(k in v for k in ("none", "new", "newnoguid")):
            parts.append(
                f"with {what} a transfer writes {v['new'][1]:.1f} pages to the log with history, "
                f"{v['none'][1]:.1f} without its triggers and {v['newnoguid'][1]:.1f} with history but "
                f"without its GUID index (without ÷ with: {v['none'][0] / v['new'][0]:.2f} in time, "
                f"{v['none'][0] / v['newnoguid'][0]:.2f} without the GUID index)")
    if not parts:
        return ""
    return (" The writer alone (the section *What the history writes* below): " + "; ".join(parts)
            + ". Most of what history costs is its GUID index: each history row (two per transfer, "
            "in two commits) puts an entry on a leaf page at its GUID's place, one more page to log "
            "and sync per row; the index is what finds a GUID's history (inspect) and lets the "
            "insert trigger record a row replaced by hand (docs/performance.md, *History cost on "
            "SQLite*, weighs the ways to take it off the write path).")
hm = median(hist)
if hm is not None and hm < 0.9:
    rounds = range(1, int(E["BENCH_COST_ROUNDS"]) + 1)
    def cost_fig(mode, f):
        return median(f(f"cost{n}-{mode}-c64") for n in rounds)
    wr = {m: cost_fig(m, lambda c: thread_ms(c, ("ledger-writer",))) for m in ("relay", "nohist")}
    oc = {m: cost_fig(m, lambda c: commits(c)[2]) for m in ("relay", "nohist")}
    ms = {m: cost_fig(m, lambda c: commits(c)[3]) for m in ("relay", "nohist")}
    st = {m: cost_fig(m, lambda c: commits(c)[1]) for m in ("relay", "nohist")}
    idle = {m: cost_fig(m, lambda c: None if busy(c) is None else 1 - busy(c)) for m in ("relay", "nohist")}
    if None not in (*wr.values(), *oc.values()):
        limit = oc["relay"] >= 0.8
        why.append(
            f"**History ÷ none ({hm:.2f})**, medians of the rounds: with history the writer thread spends "
            f"{wr['relay']:.3f} ms of CPU per transfer against {wr['nohist']:.3f} ms without the triggers, "
            f"a commit takes {fmt(ms['relay'], 2)} ms against {fmt(ms['nohist'], 2)} "
            f"({fmt(st['relay'], 1)} against {fmt(st['nohist'], 1)} statements per commit), and committing "
            f"fills {oc['relay']:.2f} of the wall clock against {oc['nohist']:.2f}; idle CPU "
            f"{pct(idle['relay'])} against {pct(idle['nohist'])}. "
            + ("The one writer thread is busy all the time, so it, not the CPU, is the limit: what "
               "the triggers add to each commit comes off throughput."
               if limit else
               "Every transfer waits for two commits (its claim's, then its result's), so what the "
               "triggers add to each commit (their statements; the history row and its GUID index "
               "entry, a page at a random place, written to the log and synced) is added to every "
               "transfer's time twice, and with a closed loop of 64 connections throughput falls "
               "with it.")
            + history_why())
rd = quot(rps("relay-c64"), rps("direct-c64"))
if rd is not None and rd < 0.3:
    ud = (by.get("direct-c64") or {}).get("cpu") or {}
    k, b, o, d = commits("relay-c64")
    why.append(
        f"**Relay ÷ direct ({rd:.2f})**: the direct cell is loadgen POSTing to the simulator, "
        f"{fmt(per_tx(busy('direct-c64'), rps('direct-c64')), 3)} ms of the machine's CPU per request"
        + ("" if ud else " (its CPU split is not taken)")
        + f"; a relayed transfer costs {fmt(per_tx(busy('relay-c64'), rps('relay-c64')), 3)} ms, of which "
        f"the relay {fmt(per_tx(((by.get('relay-c64') or {}).get('cpu') or {}).get('relay'), rps('relay-c64')), 3)} "
        f"(connection threads {fmt(thread_ms('relay-c64', ('conn',)), 3)}, ledger threads "
        f"{fmt(thread_ms('relay-c64', ('ledger',)), 3)}), and every transfer waits for two fsynced commits "
        f"({fmt(d, 2)} ms each on average; the one writer thread commits {fmt(o, 2)} of the wall clock). The profile below shows where the relay's "
        "CPU goes: the kernel's wake-ups and syscalls of a thread per connection handing each claim "
        "and result to the writer and back, loopback TCP twice (channel and core), and SQLite.")
if why:
    w("Where a missed aim's time goes, from this run's figures (the tables above and below):")
    w("")
    for x in why:
        w(f"- {x}")
    w("")
def output_section(var, title, intro):
    """A section quoting a sub-run's output file (E[var]), if it wrote anything."""
    lines = [l for l in open(E[var]).read().splitlines() if l.strip()] if E.get(var) else []
    if lines:
        w(f"## {title}")
        w("")
        w(intro)
        w("")
        w("```")
        for l in lines:
            w(l)
        w("```")
        w("")
output_section("BENCH_HISTORY", "What the history writes (the writer alone)",
    "`python3 scripts/history_trigger_cost.py --rounds 3 --purge-rows 0 --only none,new,newnoguid "
    "--guids streams`, then `--guids random`: Python's sqlite3 (its own SQLite, not the relay's), no "
    "relay; claims then results, 32 per transaction with the batch's actor row, WAL, synchronous FULL; "
    "none = schema.sql with its tx triggers dropped, new = schema.sql, newnoguid = schema.sql "
    "without the history's GUID index (and the probe that needs it). The least of the rounds in "
    "µs per transfer, the median, and the pages each transfer writes to the log (WAL frames):")
output_section("BENCH_DRAIN", "Draining UNKNOWN rows (resolve)",
    "`bash scripts/drain_bench.sh --rows 20000 --parallel \"1 8\"`: a ledger of 20,000 UNKNOWN rows (half "
    "booked at the simulator, half never), `resolve --min-age 300 --parallel K` on a copy of it "
    "for each K; every run checked (all settled, no booking made):")
output_section("BENCH_RECONCILE", "Reconcile on a million bookings",
    "`cargo test --test e2e reconcile_million -- --ignored --nocapture` with the release `reconcile`: "
    "a SQLite ledger of a million DONE/0000 rows and a journal of as many lines (10 mismatches, 4 missing, "
    "3 ghosts, 2 doubles, every count checked), `reconcile --json` timed by `/usr/bin/time` "
    "(issue 21's aim: under 10 s and 200 MiB):")
profiled = [c for c in ("prof-relay-c64", "prof-pg-relay-c64") if (by.get(c) or {}).get("profile")]
if profiled:
    w("## Profiles")
    w("")
    w("`--profile`: each cell again (not counted in any ratio above) under `perf record -a -F 499` "
      "for its first measured seconds (warm-up included), every process of the machine sampled. "
      "`perf report --no-children --sort comm` (which threads and processes the CPU went to: the "
      "relay's threads carry its name or the thread's), then the relay's process alone by "
      "library and function, then PostgreSQL's processes by function; every percentage is of all the samples of the machine.")
    w("")
    for c in profiled:
        p = by[c]["profile"]
        for part, title in (("by_command", "by command"), ("relay", "the relay, by library and function"),
                            ("postgres", "PostgreSQL's processes, by function")):
            lines = p.get(part) or []
            if not lines:
                continue
            w(f"{c}, {title}:")
            w("")
            w("```")
            for l in lines:
                w(l)
            w("```")
            w("")
cells_asked = [c for c in E.get("BENCH_CELLS", "").split(",") if c]
idle_asked = not cells_asked or "idle" in cells_asked
i = res("idle")
if idle_asked:
    w("## Idle connections")
    w("")
if i:
    kb = lambda v: "n/a" if v is None else f"{v / 1024:.1f} MiB"
    pc = i.get("rss_kb_per_connection")
    w(f"- {i.get('idle_connections')} idle channel connections opened in {fmt(i.get('open_s'), 3)} s "
      f"(connect p50 {fmt(i.get('connect_ms', {}).get('p50'), 3)} ms, p99 "
      f"{fmt(i.get('connect_ms', {}).get('p99'), 3)} ms, max {fmt(i.get('connect_ms', {}).get('max'), 3)} ms); "
      f"{i.get('still_open')} still open after {i.get('hold_s')} s; connect errors: {i.get('connect_errors')}.")
    w(f"- relay RSS: {kb(i.get('rss_kb_before'))} before, {kb(i.get('rss_kb_with'))} with them "
      f"({'n/a' if pc is None else f'{pc:.1f} KiB'} per connection); threads "
      f"{i.get('threads_before')} → {i.get('threads_with')}.")
    np, ip = i.get("new_connection_probe") or {}, i.get("idle_connection_probe") or {}
    w(f"- a transfer on a new connection while they are held: `{np.get('code')}` in {np.get('ms')} ms; "
      f"on one of the idle connections afterwards: `{ip.get('code')}` in {ip.get('ms')} ms.")
elif idle_asked:
    w("- the idle run produced no result (see the script's output).")
w("")
w("## Safety")
w("")
relay_cells = [c for c in order if by[c]["mode"] != "direct"] + (["idle"] if "idle" in by else [])
dups = sum((by[c].get("core") or {}).get("guids_booked_more_than_once") or 0 for c in relay_cells)
mism = sum(res(c).get("resend_mismatches") or 0 for c in relay_cells)
malf = sum(res(c).get("malformed_replies") or 0 for c in order + ["idle"] if c in by)
books = sum((by[c].get("core") or {}).get("bookings") or 0 for c in relay_cells)
resends = sum(res(c).get("resends") or 0 for c in relay_cells)
w(f"- GUIDs booked more than once by the core, over every relay cell: **{dups}** "
  f"(core bookings checked: {books:,})")
w(f"- resend mismatches (a resend of a `0000` GUID answered with other bytes): **{mism}** "
  f"(measured resends: {resends:,})")
w(f"- malformed replies: **{malf}**")
w("- ledger states after each relay cell: " + "; ".join(
    f"{c} {by[c].get('ledger')}" for c in order if by[c]["mode"] != "direct"))
w("")
w("## Relay log")
w("")
w("WARN/ERROR lines the relay logged per cell (INFO request lines not counted):")
w("")
for c in [c for c in order if by[c]["mode"] != "direct"] + (["idle"] if "idle" in by else []):
    lg = by[c].get("relay_log") or {}
    top = "; ".join(f"{n} x `{m}`" for m, n in lg.get("top", [])) or "none"
    w(f"- {c}: {lg.get('warn_error_lines', 'n/a')} ({top})")
w("")
w("## Commands")
w("")
w("Each cell started `coresim --listen 127.0.0.1:0` and, for relay cells, "
  "`relay --db <fresh temp ledger> --listen 127.0.0.1:0 --core http://<core> --admin 127.0.0.1:0` (the admin port for the commit figures); ports are the "
  "kernel's, so they differ from run to run; the tls cells' relays also had `--tls-cert "
  "relay.pem --tls-key relay.key --client-ca ca.pem` (made by `pkigen DIR --client channel-a`), "
  "the http cells' relays `--http-listen 127.0.0.1:0` (loadgen `--relay` is then that address). "
  "Then:")
w("")
w("```")
for c in order + (["idle"] if "idle" in by else []):
    w(by[c].get("command") or "")
w("```")
w("")
open(sys.argv[2], "w").write("\n".join(L))
# The figures on stdout: from the results to the first section after them that is not one.
ends = [L.index(h) for h in ("## Draining UNKNOWN rows (resolve)", "## Reconcile on a million bookings",
                             "## Profiles", "## Idle connections", "## Safety") if h in L]
print("\n".join(L[L.index("## Results"):min(ends)]))
PY
echo "== wrote $out"
if ((failed)); then
    echo "bench.sh: a safety check failed (see above)" >&2
    exit 1
fi
