# shellcheck shell=bash
# Shared helpers for the operator wrappers in this directory (relay.sh, resolve.sh,
# reprocess.sh, purge.sh). Sourced, never run. Needs bash >= 5 (EPOCHREALTIME) and, for
# the batch wrappers, flock(1) from util-linux >= 2.26 (for -E).
#
# The calling script sets SELF (its own name, e.g. "resolve.sh") and SCRIPT_DIR (the
# directory it lives in, symlinks resolved) before sourcing this file.
: "${SELF:?set SELF before sourcing lib.sh}" "${SCRIPT_DIR:?set SCRIPT_DIR before sourcing lib.sh}"

# What an installed wrapper run by hand takes itself: installed.sh, beside this file.
# shellcheck source=SCRIPTDIR/installed.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/installed.sh"

# Exit codes of the wrappers themselves. The tools' own codes (0 settled/ok, 1 fatal,
# 2 usage, 3 rows left for a later run) are passed through unchanged.
readonly EXIT_CONFIG=2     # a setting is missing or malformed (same class as a bad flag)
readonly EXIT_LOCKED=75    # EX_TEMPFAIL: another run of the same wrapper holds the lock
readonly EXIT_NO_BINARY=127 # the tool's binary was not found

# ISO-8601 UTC timestamp with milliseconds, e.g. 2026-01-31T23:59:59.123Z. No fork.
ts() {
    local now=${EPOCHREALTIME:-}
    if [[ -z $now ]]; then
        date -u +%Y-%m-%dT%H:%M:%S.%3NZ
        return
    fi
    local secs=${now%[.,]*} frac=${now#*[.,]}
    frac="${frac}000"
    TZ=UTC printf '%(%Y-%m-%dT%H:%M:%S)T.%sZ\n' "$secs" "${frac:0:3}"
}

# One timestamped line of the wrapper's own on stderr.
log() {
    printf '%s %s: %s\n' "$(ts)" "$SELF" "$*" >&2
}

# Logs and exits with the given code.
die() {
    local code=$1
    shift
    log "$*"
    exit "$code"
}

# Copies stdin to stdout, each line prefixed with a timestamp (taken when the line
# arrives). A tool's own log line, `[TIMESTAMP LEVEL target] message`, keeps its own
# timestamp, moved to the front: `TIMESTAMP [LEVEL target] message`, one timestamp a line.
# A last line without a newline is kept too.
stamp() {
    local line
    local own='^\[([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z) (.*)$'
    while IFS= read -r line || [[ -n $line ]]; do
        if [[ $line =~ $own ]]; then
            printf '%s [%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        else
            printf '%s %s\n' "$(ts)" "$line"
        fi
    done
}

# The query parameters the tools' PostgreSQL client knows (a URL with another is refused).
readonly PG_PARAMS=" user password dbname options application_name sslmode sslnegotiation sslrootcert host hostaddr port connect_timeout tcp_user_timeout keepalives keepalives_idle keepalives_interval keepalives_retries target_session_attrs channel_binding load_balance_hosts "

# mask_url DB: prints DB as the tools show it in their log lines and errors. A path is
# printed unchanged. A PostgreSQL URL (postgres:// or postgresql://) is printed as
# SCHEME://USER:***@HOST:PORT,.../DBNAME?PARAMS: the password (in the user info or a
# password= parameter) is `***`, each host has its port (5432 unless given), and the user,
# password, host, port and dbname parameters are left out of the query. A URL the tools
# refuse (a second `@`, a user name holding `/` or `?`, a parameter without `=` or one they
# do not know) is printed as SCHEME://*** only: where its password ends is not known.
# The user info ends at the first `@`, as in the tools, so a password may hold / ? # : %.
mask_url() {
    local url=$1 scheme rest creds='' after user='' at=0 pw=0 hostpart tail path='' query=''
    local out pair key chunk
    local -a hosts=() shown=() pairs=() chunks=()
    case $url in
        postgres://* | postgresql://*) ;;
        *)
            printf '%s\n' "$url"
            return
            ;;
    esac
    scheme=${url%%://*}
    rest=${url#*://}
    after=$rest
    if [[ $rest == *@* ]]; then
        creds=${rest%%@*} after=${rest#*@} at=1
        user=${creds%%:*}
        [[ $creds == *:* ]] && pw=1
        if [[ $after == *@* || $user == *[/?]* ]]; then
            printf '%s://***\n' "$scheme"
            return
        fi
    fi
    hostpart=${after%%[/?]*}
    tail=${after:${#hostpart}}
    if [[ $tail == /* ]]; then
        path=${tail#/} path=${path%%\?*}
    fi
    [[ $tail == *\?* ]] && query=${tail#*\?}
    IFS='&' read -r -a pairs <<<"$query"
    for pair in "${pairs[@]}"; do
        [[ -n $pair ]] || continue
        key=${pair%%=*}
        if [[ $pair != *=* || $PG_PARAMS != *" $key "* ]]; then
            printf '%s://***\n' "$scheme"
            return
        fi
        case $key in
            password) pw=1 ;;
            user) user=${pair#*=} at=1 ;;
            host | port | dbname) ;;
            *) shown+=("$pair") ;;
        esac
    done
    IFS=',' read -r -a chunks <<<"$hostpart"
    for chunk in "${chunks[@]}"; do
        if [[ $chunk == \[* ]]; then
            [[ $chunk == *\]:* ]] || chunk+=:5432
        else
            [[ $chunk == *:* ]] || chunk+=:5432
        fi
        hosts+=("$chunk")
    done
    out="$scheme://"
    if ((at || pw)); then
        out+=$user
        ((pw)) && out+=':***'
        out+=@
    fi
    out+=$(IFS=,; printf '%s' "${hosts[*]}")
    [[ -z $path ]] || out+="/$path"
    ((${#shown[@]} == 0)) || out+="?$(IFS='&'; printf '%s' "${shown[*]}")"
    printf '%s\n' "$out"
}

# mask_core_url URL: prints a core URL as log lines may show it: one holding an `@`
# (credentials, user:password@host) with everything from after its scheme to its last `@`
# shown as `***`, as the tools show it in their refusal; any other unchanged. Any `@` counts:
# a password holding `/` or `?` ends the URL's authority early.
mask_core_url() {
    local url=$1 scheme=''
    if [[ $url != *@* ]]; then
        printf '%s\n' "$url"
        return
    fi
    if [[ ${url%@*} == *://* ]]; then
        scheme="${url%%://*}://"
    fi
    printf '%s***@%s\n' "$scheme" "${url##*@}"
}

# core_without_credentials VAR ARG...: exits with EXIT_CONFIG, before any line shows the
# URL, if a core URL the tool could be given holds credentials (an `@`): any --core among the
# ARGs (up to a `--`), VAR (e.g. RESOLVE_CORE), or CORE_URL, which VAR falls back to. ureq
# would send them as HTTP Basic authentication, and the URL is shown in log lines; the tool
# refuses them too (exit 2). The message names where the URL came from and shows it masked
# (mask_core_url), never the password.
core_without_credentials() {
    local var=$1 a prev='' what='' url=''
    shift
    for a in "$@"; do
        [[ $a == -- ]] && break
        if [[ $prev == --core && $a == *@* ]]; then
            what=--core url=$a
            break
        elif [[ $a == --core=*@* ]]; then
            what=--core url=${a#--core=}
            break
        fi
        prev=$a
    done
    if [[ -z $what && ${!var:-} == *@* ]]; then
        what=$var url=${!var}
    elif [[ -z $what && ${CORE_URL:-} == *@* ]]; then
        what="CORE_URL (which $var falls back to)" url=$CORE_URL
    fi
    [[ -n $what ]] || return 0
    die "$EXIT_CONFIG" "$what must not hold credentials ($(mask_core_url "$url")): user:password@ in the core's URL is sent as HTTP Basic authentication and would show wherever the URL is logged; give the URL without them, and have the core authenticate this host by a TLS client certificate (${var}_CERT and ${var}_KEY, or --core-cert and --core-key, over https://)"
}

# shown_args ARG...: the arguments as one line for a log line, every PostgreSQL URL in them
# (an argument of its own, or the value of --OPT=URL) masked as mask_url does, and every
# other URL holding credentials (an http:// or https:// argument, or the value of --core)
# masked as mask_core_url does.
shown_args() {
    local a prev=''
    local -a out=()
    for a in "$@"; do
        local shown=$a
        case $a in
            postgres://* | postgresql://*) shown=$(mask_url "$a") ;;
            --*=postgres://* | --*=postgresql://*) shown="${a%%=*}=$(mask_url "${a#*=}")" ;;
            --core=*) shown="--core=$(mask_core_url "${a#--core=}")" ;;
            http://* | https://*) shown=$(mask_core_url "$a") ;;
            *)
                if [[ $prev == --core ]]; then
                    shown=$(mask_core_url "$a")
                fi
                ;;
        esac
        out+=("$shown")
        prev=$a
    done
    printf '%s\n' "${out[*]}"
}

# True if any argument asks for help. Scans everything, so `resolve.sh --json --help`
# prints the wrapper's usage too.
wants_help() {
    local a
    for a in "$@"; do
        case $a in
            -h | --help) return 0 ;;
            --) return 1 ;;
        esac
    done
    return 1
}

# True if option $1 (e.g. --force) is among the arguments that follow (up to a `--`).
has_arg() {
    local opt=$1 a
    shift
    for a in "$@"; do
        case $a in
            --) return 1 ;;
            "$opt") return 0 ;;
        esac
    done
    return 1
}

# arg_value OPT ARG...: finds option OPT (e.g. --db) among the ARGs (up to a `--`) as
# `OPT VALUE` or `OPT=VALUE`, the two forms the tools' parser (clap) takes. Returns 0 with
# REPLY set to the value of its last occurrence, 1 if OPT is not there, 2 if its last
# occurrence has no value (none, an empty one, or the next argument starts with `-`: clap
# refuses all three).
arg_value() {
    local opt=$1 rc=1
    shift
    REPLY=
    while (($# > 0)); do
        case $1 in
            --) break ;;
            "$opt")
                if (($# < 2)) || [[ -z $2 || $2 == -* ]]; then
                    REPLY= rc=2
                else
                    REPLY=$2 rc=0
                    shift
                fi
                ;;
            "$opt"=*)
                REPLY=${1#"$opt"=} rc=0
                [[ -n $REPLY ]] || rc=2
                ;;
        esac
        shift
    done
    return "$rc"
}

# effective OPT FALLBACK ARG...: prints the value the tool will use for OPT: the last one
# among the ARGs (an option on the command line wins in the tool), else FALLBACK (what the
# environment gives it). For log lines.
effective() {
    local opt=$1 fallback=$2
    shift 2
    if arg_value "$opt" "$@"; then
        printf '%s\n' "$REPLY"
    else
        printf '%s\n' "$fallback"
    fi
}

# tool_setting VAR GENERIC DEFAULT: settles the tool's own variable VAR (e.g. RESOLVE_CORE)
# as the operator means it: VAR itself if set and non-empty, else the wrapper's generic
# variable named GENERIC (e.g. CORE_URL; '' for none), else DEFAULT (may be ''). Exports
# VAR with the outcome, or unsets it if that is empty (an empty value would be a parse
# error in the tool).
tool_setting() {
    local var=$1 generic=$2 default=$3 value
    value=${!var:-}
    if [[ -z $value && -n $generic ]]; then
        value=${!generic:-}
    fi
    value=${value:-$default}
    if [[ -n $value ]]; then
        export "$var=$value"
    else
        unset "$var"
    fi
}

# pass_through VAR...: variables the tool reads itself, passed on unchanged; an empty one
# is unset (an empty value would be a parse error in the tool).
pass_through() {
    local var
    for var in "$@"; do
        if [[ -n ${!var:-} ]]; then
            export "${var?}"
        else
            unset "$var"
        fi
    done
}

# require_int NAME VALUE MIN: VALUE must be a decimal integer >= MIN.
require_int() {
    local name=$1 value=$2 min=$3
    if ! [[ $value =~ ^[0-9]+$ ]] || ((10#$value < min)); then
        die "$EXIT_CONFIG" "$name must be an integer >= $min, got '${value}'"
    fi
}

# Prints the path of tool $1: $RELAY_BIN_DIR/$1 when RELAY_BIN_DIR is set (and nothing
# else); otherwise ../bin/$1 beside the scripts (the package's), ../target/release/$1 and
# ../target/debug/$1 (a source tree), then PATH. No executable one: returns 1, prints nothing.
find_bin() {
    local name=$1 candidate
    if [[ -n ${RELAY_BIN_DIR:-} ]]; then
        candidate="$RELAY_BIN_DIR/$name"
        [[ -f $candidate && -x $candidate ]] || return 1
        printf '%s\n' "$candidate"
        return 0
    fi
    for candidate in "${SCRIPT_DIR%/*}/bin/$name" "${SCRIPT_DIR%/*}/target/release/$name" "${SCRIPT_DIR%/*}/target/debug/$name"; do
        if [[ -f $candidate && -x $candidate ]]; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    command -v -- "$name" 2>/dev/null || return 1
}

# Like find_bin, but exits with EXIT_NO_BINARY and a message naming where it looked.
need_bin() {
    local name=$1 path
    if ! path=$(find_bin "$name"); then
        if [[ -n ${RELAY_BIN_DIR:-} ]]; then
            die "$EXIT_NO_BINARY" "no executable '$name' in RELAY_BIN_DIR=$RELAY_BIN_DIR"
        fi
        die "$EXIT_NO_BINARY" "no executable '$name' in ${SCRIPT_DIR%/*}/bin, ${SCRIPT_DIR%/*}/target/{release,debug} nor on PATH; set RELAY_BIN_DIR"
    fi
    printf '%s\n' "$path"
}

# Appends the tool's own --help (its flags, all of which may be passed through), if the
# binary can be found. Never fails.
tool_help() {
    local name=$1 path
    printf '\nOptions of %s (extra arguments are passed to it unchanged):\n\n' "$name"
    if path=$(find_bin "$name"); then
        "$path" --help 2>&1 | sed -e '1,/^Options:/d' -e 's/^/  /' || true
    else
        printf '  (binary not found; build it with: cargo build --release --bins)\n'
    fi
}

# The usage text shared by the batch wrappers (resolve.sh, reprocess.sh, purge.sh):
# $1 = tool, $2 = one-line description, $3 = the tool-specific variables (CORE_URL and the
# tool's own core variable included where the tool uses them), already formatted.
batch_usage() {
    local tool=$1 what=$2 specific=$3 var=${1^^}_DB
    cat <<EOF
Usage: $SELF [TOOL-OPTION...]

$what
Runs $tool once under a lock, for cron or a service manager (a oneshot unit + timer).

Environment (empty variables count as unset):
  LEDGER_DB            the relay's SQLite ledger; required unless $var or a --db
                       argument names it  [installed: $PKG_STATE_DIR/ledger.db]
  $(printf '%-20s' "$var") the ledger, for $tool only: wins over LEDGER_DB
$specific  LOCK_DIR             directory of the lock file   [default: the ledger's directory]
                       lock file: \${LOCK_DIR:-\$(dirname DB)}/\$(basename DB).$tool.lock,
                       DB being the ledger the tool opens: the last --db (or --db=)
                       argument, else $var, else LEDGER_DB; required for a
                       PostgreSQL ledger (postgres://...), whose lock file is named
                       after its URL as logged (password masked)
                       [installed, PostgreSQL: $PKG_STATE_DIR]
  RELAY_BIN_DIR        directory holding the $tool binary
                       [default: ../bin, else ../target/release, else ../target/debug
                       next to this script, else PATH]
  TXRELAY_ENV_FILE     settings read first, KEY=VALUE lines as systemd reads its
                       EnvironmentFile=; a variable set in the environment wins;
                       empty: none  [installed: /etc/txrelay/batch.env; else none]
  RUST_LOG             log filter of the tool       [default: info]

Installed ($PKG_SCRIPT_DIR), run by hand (as txrelay, as the timer runs it), this script
does the timer's run: it reads /etc/txrelay/batch.env and has the unit's defaults.

Precedence: an option given on the command line wins (the tool reads it); then the
tool's own variable (${tool^^}_...) if set; then this script's generic one (LEDGER_DB,
CORE_URL); then the default. This script exports the outcome as the tool's variable,
and its log line shows the values the tool will use.

Output: the tool's stdout (summary line, or JSON with --json) is passed through
untouched. Every stderr line, the tool's and this script's, is prefixed with an
ISO-8601 UTC timestamp (e.g. 2026-01-31T23:59:59.123Z).

Exit codes:
  0    done: everything selected was settled (or nothing to do, or --dry-run)
  1    fatal error of the tool (cannot open the ledger, ...), or the lock file
       cannot be opened or locked (no flock(1), flock(1) failed, ...)
  2    usage: bad option (from the tool) or a missing/malformed setting (from $SELF)
  3    some rows are left for a later run (core unreachable, inquiry error, skipped rows)
  75   another $SELF run on the same ledger holds the lock; nothing was done (EX_TEMPFAIL)
  127  the $tool binary was not found
  other: the tool was killed by a signal (128 + signal number)
EOF
    tool_help "$tool"
}

# Settles the ledger of batch tool $1 from the arguments that follow (those passed to the
# tool) and the environment, and sets:
#   ${TOOL}_DB  exported: ${TOOL}_DB if set, else LEDGER_DB (unset if neither is);
#   DB          the ledger the tool will open: the last --db/--db= among the arguments
#               (it wins in the tool), else ${TOOL}_DB; exits with EXIT_CONFIG if
#               nothing names one;
#   SHOWN_DB    DB as log lines show it (mask_url: a URL's password masked);
#   LOCK_FILE   ${LOCK_DIR:-$(dirname DB)}/$(basename DB).$1.lock: every run of the tool
#               on one ledger takes the same lock, whichever way it was told the path; for
#               a PostgreSQL URL, $LOCK_DIR/SHOWN_DB.$1.lock with every character but
#               letters, digits and . _ - made `_` (LOCK_DIR is then required);
# and exports RUST_LOG (default info).
batch_settings() {
    local tool=$1 var=${1^^}_DB rc=0 dir
    shift
    export RUST_LOG=${RUST_LOG:-info}
    # Installed, the ledger the units name (Environment=LEDGER_DB): by hand the same.
    tool_setting "$var" LEDGER_DB "$(pkg_default "$PKG_STATE_DIR/ledger.db")"
    arg_value --db "$@" || rc=$?
    case $rc in
        0) DB=$REPLY ;;
        1) DB=${!var:-} ;;
        *) die "$EXIT_CONFIG" "--db needs a value: the path of the relay's SQLite ledger" ;;
    esac
    [[ -n $DB ]] || die "$EXIT_CONFIG" "LEDGER_DB is not set (nor $var, nor a --db argument): the path of the relay's SQLite ledger is required (see $SELF --help)"
    SHOWN_DB=$(mask_url "$DB")
    if [[ $DB == postgres://* || $DB == postgresql://* ]]; then
        # Installed, the state directory: the timers' runs and those by hand take one lock.
        LOCK_DIR=${LOCK_DIR:-$(pkg_default "$PKG_STATE_DIR")}
        [[ -n ${LOCK_DIR:-} ]] || die "$EXIT_CONFIG" "LOCK_DIR must be set for a PostgreSQL ledger ($SHOWN_DB): it has no directory of its own for the lock file"
        LOCK_FILE="$LOCK_DIR/${SHOWN_DB//[^A-Za-z0-9._-]/_}.$tool.lock"
        return
    fi
    if [[ -n ${LOCK_DIR:-} ]]; then
        dir=$LOCK_DIR
    else
        dir=$(dirname -- "$DB")
    fi
    LOCK_FILE="$dir/$(basename -- "$DB").$tool.lock"
}

# Takes the wrapper's lock without waiting, or exits with EXIT_LOCKED. flock(1) reports a
# lock held elsewhere with its -E code (EXIT_LOCKED), so that no failure of flock itself
# (exit 1 for a bad argument, 64 for an option it does not know, ...) can pass for
# "another run": those are fatal (exit 1). The lock's file descriptor stays open in the
# tool too, so the lock is held as long as the tool runs, even if this script is killed
# first. The lock file is never deleted (deleting it would let two runs lock two different
# files).
take_lock() {
    local made=0
    [[ -e $LOCK_FILE ]] || made=1
    if ! { exec {LOCK_FD}>>"$LOCK_FILE"; } 2>/dev/null; then
        die 1 "cannot open lock file $LOCK_FILE (set LOCK_DIR to a writable directory)"
    fi
    # A lock file made by root (a run by hand) gets its directory's owner: the package's
    # timers run as txrelay, and a lock file only root may open would fail every later run.
    if ((made && EUID == 0)); then
        chown -- "$(stat -c %u:%g -- "$(dirname -- "$LOCK_FILE")")" "$LOCK_FILE" 2>/dev/null || true
    fi
    command -v flock >/dev/null || die 1 "flock(1) not found; install util-linux"
    local rc=0 out
    # In a command substitution so that flock's own message is logged with a timestamp.
    # The lock belongs to the open file, which this shell keeps open afterwards.
    out=$(flock -n -E "$EXIT_LOCKED" "$LOCK_FD" 2>&1) || rc=$?
    case $rc in
        0) ;;
        "$EXIT_LOCKED") die "$EXIT_LOCKED" "another run holds $LOCK_FILE; not running (exit $EXIT_LOCKED)" ;;
        *) die 1 "flock $LOCK_FILE failed (exit $rc)${out:+: ${out//$'\n'/ }}" ;;
    esac
}

# Runs "$@" with its stderr timestamped line by line and its stdout untouched; sets RC to
# its exit code. Waits until every stderr line is written. Neither the tool's exit code
# nor set -e is lost to a pipeline: stderr goes through a process substitution.
# shellcheck disable=SC2034 # RC is read by the caller
run_stamped() {
    local errfd pid
    exec {errfd}> >(stamp >&2)
    pid=$!
    RC=0
    "$@" 2>&"$errfd" {errfd}>&- || RC=$?
    exec {errfd}>&-
    wait "$pid" || true
}
