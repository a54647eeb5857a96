#!/usr/bin/env bash
# reconcile.sh: reconciles the ledger against the core's booking journal for one day (UTC),
# under a lock, for cron; the report is kept in a dated file. With one export a day
# (RECONCILE_JOURNAL holding {DAY}), the exports of the days before are read too, so that a
# GUID the core booked again on another day is seen booked twice.
# Settings come from the environment; see `reconcile.sh --help`.
set -euo pipefail

SELF=reconcile.sh
SCRIPT_DIR=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
# shellcheck source=SCRIPTDIR/lib.sh
source "$SCRIPT_DIR/lib.sh"

if wants_help "$@"; then
    cat <<EOF
Usage: $SELF [RECONCILE-OPTION...]

Reconciles the ledger against the core's booking journal (read-only: no write to the
ledger, no call to the core) for one day, under a lock; the report (one line per break
and the summary, or JSON with --json) goes to stdout and to
\$RECONCILE_REPORT_DIR/reconcile-DAY.txt (replaced atomically).

Environment (empty variables count as unset):
  LEDGER_DB              the relay's ledger (SQLite path or postgres:// URL); required
                         unless RECONCILE_DB or a --db argument names it
  RECONCILE_DB           the ledger, for reconcile only: wins over LEDGER_DB
  RECONCILE_JOURNAL      the core's booking journal (required unless a --journal
                         argument names it): one file, read as it is, or the path of
                         the core's daily exports with {DAY} standing for the day's
                         date, e.g. /srv/core-export/bookings-{DAY}.jsonl: then the
                         export of DAY and those of the RECONCILE_LOOKBACK_DAYS days
                         before it are read, as one journal (each must be there)
  RECONCILE_LOOKBACK_DAYS
                         days before DAY whose exports are read too, with {DAY} in
                         RECONCILE_JOURNAL (0: DAY's alone)   [default: 2]
  RECONCILE_DAY          the day reconciled, YYYY-MM-DD (UTC): the window is
                         [DAY 00:00:00Z, DAY+1 00:00:00Z)   [default: yesterday, UTC]
                         (RECONCILE_FROM/RECONCILE_TO or --from/--to win)
  RECONCILE_REPORT_DIR   directory of the dated reports   [default: the ledger's
                         directory; required for a PostgreSQL ledger, installed:
                         $PKG_STATE_DIR]
  RECONCILE_METRICS_FILE counts per class for node_exporter's textfile collector
  LOCK_DIR               directory of the lock file   [default: the ledger's directory;
                         required for a PostgreSQL ledger, installed: $PKG_STATE_DIR]
  RELAY_BIN_DIR          directory holding the reconcile binary
                         [default: ../bin, else ../target/release, else
                         ../target/debug next to this script, else PATH]
  TXRELAY_ENV_FILE       settings read first, KEY=VALUE lines as systemd reads its
                         EnvironmentFile=; a variable set in the environment wins;
                         empty: none  [installed: /etc/txrelay/batch.env; else none]
  RUST_LOG               log filter of the tool       [default: info]

Installed ($PKG_SCRIPT_DIR, by the Debian package), this script run by hand does what
its timer's run does: it reads /etc/txrelay/batch.env and has the defaults the unit gives
(the ledger $PKG_STATE_DIR/ledger.db). Run it as the txrelay user, as the timer does.

Exit codes (the tool's, passed through):
  0    no break
  1    at least one break (double, ghost, mismatch, missing): see the report
  2    usage: bad option or setting
  3    the journal or the ledger cannot be read (one line naming it; a day of the
       look-back whose export is not there too); no verdict
  75   another $SELF run on the same ledger holds the lock; nothing was done
  127  the reconcile binary was not found
EOF
    tool_help reconcile
    exit 0
fi

# Run by hand, an installed wrapper reads /etc/txrelay/batch.env, as its unit does.
read_settings /etc/txrelay/batch.env
batch_settings reconcile "$@"
pass_through RECONCILE_JOURNAL RECONCILE_FROM RECONCILE_TO RECONCILE_METRICS_FILE
if ! arg_value --journal "$@" && [[ -z ${RECONCILE_JOURNAL:-} ]]; then
    die "$EXIT_CONFIG" "RECONCILE_JOURNAL is not set (nor a --journal argument): the core's booking journal is required (see $SELF --help)"
fi
DAY=${RECONCILE_DAY:-$(date -u -d yesterday +%Y-%m-%d)}
if ! [[ $DAY =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || ! date -u -d "$DAY" +%F >/dev/null 2>&1; then
    die "$EXIT_CONFIG" "RECONCILE_DAY must be a day YYYY-MM-DD, got '$DAY'"
fi
LOOKBACK=${RECONCILE_LOOKBACK_DAYS:-2}
require_int RECONCILE_LOOKBACK_DAYS "$LOOKBACK" 0
LOOKBACK=$((10#$LOOKBACK))
window=()
if ! arg_value --from "$@" && [[ -z ${RECONCILE_FROM:-} ]]; then
    window+=(--from "${DAY}T00:00:00Z")
fi
if ! arg_value --to "$@" && [[ -z ${RECONCILE_TO:-} ]]; then
    window+=(--to "$(date -u -d "$DAY + 1 day" +%F)T00:00:00Z")
fi

# The journals: a --journal argument wins (the operator names every file). Otherwise a
# RECONCILE_JOURNAL with {DAY} is the path of the core's daily exports: the day's and the
# LOOKBACK days' before it are passed, oldest first, as one journal. A double booking can
# straddle midnight (one booking on each side), and only the days before show it whole. A
# day that is missing is not skipped: the tool refuses it (exit 3, no verdict), since a
# verdict without it could call such a double clean.
journals=()
journal_files=()
lookback_files=()
if ! arg_value --journal "$@" && [[ ${RECONCILE_JOURNAL:-} == *'{DAY}'* ]]; then
    for ((back = LOOKBACK; back >= 0; back--)); do
        d=$(date -u -d "$DAY - $back day" +%F)
        f=${RECONCILE_JOURNAL//'{DAY}'/$d}
        journals+=(--journal "$f")
        journal_files+=("$f")
        ((back == 0)) || lookback_files+=("$f")
    done
    shown_journals="${journal_files[*]}"
    unset RECONCILE_JOURNAL
else
    shown_journals=$(effective --journal "${RECONCILE_JOURNAL:-}" "$@")
    if ((LOOKBACK > 0)) && ! arg_value --journal "$@"; then
        log "RECONCILE_JOURNAL names one file (no {DAY}): it is read as it is, and the look-back over the days before $DAY (RECONCILE_LOOKBACK_DAYS=$LOOKBACK) is whatever that file holds"
    fi
fi

if [[ -n ${RECONCILE_REPORT_DIR:-} ]]; then
    REPORT_DIR=$RECONCILE_REPORT_DIR
elif [[ $DB == postgres://* || $DB == postgresql://* ]] && installed; then
    REPORT_DIR=$PKG_STATE_DIR # the lock's directory too (batch_settings)
elif [[ $DB == postgres://* || $DB == postgresql://* ]]; then
    die "$EXIT_CONFIG" "RECONCILE_REPORT_DIR must be set for a PostgreSQL ledger ($SHOWN_DB)"
else
    REPORT_DIR=$(dirname -- "$DB")
fi
[[ -d $REPORT_DIR && -w $REPORT_DIR ]] || die "$EXIT_CONFIG" "RECONCILE_REPORT_DIR $REPORT_DIR is not a writable directory"
REPORT="$REPORT_DIR/reconcile-$DAY.txt"

BIN=$(need_bin reconcile)

take_lock
log "running $BIN (ledger $SHOWN_DB, journal $shown_journals, day $DAY, report $REPORT, lock $LOCK_FILE)${*:+ with: $(shown_args "$@")}"
TMP=$(mktemp "$REPORT_DIR/.reconcile-$DAY.XXXXXX")
trap 'rm -f -- "$TMP"' EXIT
run_stamped "$BIN" "${window[@]}" "${journals[@]}" "$@" >"$TMP"
cat -- "$TMP"
if ((RC <= 1)); then
    chmod 0644 -- "$TMP"
    mv -f -- "$TMP" "$REPORT"
    if ((RC == 0)); then verdict='no break'; else verdict='breaks'; fi
    log "reconcile exited $RC ($verdict): $(tail -n 1 -- "$REPORT")"
else
    log "reconcile exited $RC; no report written"
    for f in "${lookback_files[@]}"; do
        if [[ ! -e $f ]]; then
            log "the look-back (RECONCILE_LOOKBACK_DAYS=$LOOKBACK) reads the core's exports of the $LOOKBACK day(s) before $DAY too, and $f is not there: put that day's export there, or set RECONCILE_LOOKBACK_DAYS lower (0: $DAY's alone) and know that a double booking across that midnight can go unseen"
            break
        fi
    done
fi
exit "$RC"
