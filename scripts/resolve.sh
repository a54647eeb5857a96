#!/usr/bin/env bash
# resolve.sh: settles UNKNOWN ledger rows (and, with --stale-sent SECS on the command line,
# orphaned SENT rows) by inquiry at the core, never overlapping another resolve.sh on the
# same ledger.
# Settings come from the environment; see `resolve.sh --help`.
set -euo pipefail

SELF=resolve.sh
SCRIPT_DIR=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
# shellcheck source=SCRIPTDIR/lib.sh
source "$SCRIPT_DIR/lib.sh"

if wants_help "$@"; then
    batch_usage resolve \
        "Settles UNKNOWN rows by asking the core (GET only, never POSTs): 200 -> DONE, 404 -> FAILED/E902." \
        "  CORE_URL             base URL of the core         [default: http://127.0.0.1:9201]
  RESOLVE_CORE         the core, for resolve only: wins over CORE_URL
  RESOLVE_MIN_AGE      only rows unchanged for this many seconds; must exceed the
                       core's longest processing time (a 404 from a core still at work
                       would mark a booked transfer FAILED)  [default: 300]
  RESOLVE_CONNECT_TIMEOUT_MS, RESOLVE_READ_TIMEOUT_MS
                       the tool's --connect-timeout-ms and --read-timeout-ms, passed
                       through from the environment unchanged
                       [default: the tool's, 1000 and 5000]
  RESOLVE_CORE_CA, RESOLVE_CORE_CERT, RESOLVE_CORE_KEY
                       for an https:// core: the tool's --core-ca (trusted CA
                       certificates, PEM; default: the system's roots) and
                       --core-cert/--core-key (client certificate for mutual TLS),
                       passed through unchanged
  RESOLVE_MAX_INQUIRIES
                       stop asking about a GUID after this many failed inquiries; it
                       is then left to an operator (listed, exit 3)  [default: the
                       tool's, 20]
  RESOLVE_PARALLEL     inquiries made at once, 1 to 256  [default: the tool's, 8]
  RESOLVE_STALE_SENT   IGNORED, with a warning: SENT rows (left by a relay that died)
                       are settled only when asked on the command line, with
                       --stale-sent SECS as an argument of this script, e.g.
                       $SELF --stale-sent 900. SECS must exceed the relay's connect +
                       read timeout by a wide margin; resolve refuses less than 60.
"
    exit 0
fi

# Run by hand, an installed wrapper reads /etc/txrelay/batch.env, as its unit does.
read_settings /etc/txrelay/batch.env

# Settling SENT rows is asked for on the command line only: a leftover variable in a
# crontab or unit file must not do it.
if [[ -n ${RESOLVE_STALE_SENT:-} ]]; then
    log "warning: RESOLVE_STALE_SENT=$RESOLVE_STALE_SENT is ignored; to settle SENT rows, pass --stale-sent SECS as an argument ($SELF --stale-sent SECS)"
fi
unset RESOLVE_STALE_SENT

batch_settings resolve "$@"
# Before the URL is shown anywhere: credentials in it are refused, not logged.
core_without_credentials RESOLVE_CORE "$@"
tool_setting RESOLVE_CORE CORE_URL http://127.0.0.1:9201
RESOLVE_MIN_AGE=${RESOLVE_MIN_AGE:-300}
require_int RESOLVE_MIN_AGE "$RESOLVE_MIN_AGE" 0
export RESOLVE_MIN_AGE
pass_through RESOLVE_CONNECT_TIMEOUT_MS RESOLVE_READ_TIMEOUT_MS RESOLVE_MAX_INQUIRIES \
    RESOLVE_PARALLEL RESOLVE_CORE_CA RESOLVE_CORE_CERT RESOLVE_CORE_KEY

BIN=$(need_bin resolve)

take_lock
log "running $BIN (ledger $SHOWN_DB, core $(effective --core "$RESOLVE_CORE" "$@"), min-age $(effective --min-age "$RESOLVE_MIN_AGE" "$@")s, stale-sent $(effective --stale-sent off "$@"), connect-timeout-ms $(effective --connect-timeout-ms "${RESOLVE_CONNECT_TIMEOUT_MS:-default}" "$@"), read-timeout-ms $(effective --read-timeout-ms "${RESOLVE_READ_TIMEOUT_MS:-default}" "$@"), max-inquiries $(effective --max-inquiries "${RESOLVE_MAX_INQUIRIES:-default}" "$@"), parallel $(effective --parallel "${RESOLVE_PARALLEL:-default}" "$@"), lock $LOCK_FILE)${*:+ with: $(shown_args "$@")}"
run_stamped "$BIN" "$@"
log "resolve exited $RC"
exit "$RC"
