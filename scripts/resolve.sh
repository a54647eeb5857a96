#!/usr/bin/env bash
# resolve.sh: settles UNKNOWN ledger rows (and, with RESOLVE_STALE_SENT, orphaned SENT rows)
# by inquiry at the core, never overlapping another resolve.sh on the same ledger.
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
  RESOLVE_MIN_AGE      only rows unchanged for this many seconds; must exceed the
                       core's longest processing time (a 404 from a core still at work
                       would mark a booked transfer FAILED)  [default: 300]
  RESOLVE_STALE_SENT   also settle SENT rows unchanged this many seconds (left by a
                       relay that died); must exceed the relay's connect + read
                       timeout by a wide margin  [default: empty = off]
"
    exit 0
fi

batch_settings resolve
RESOLVE_MIN_AGE=${RESOLVE_MIN_AGE:-300}
RESOLVE_STALE_SENT=${RESOLVE_STALE_SENT:-}
require_int RESOLVE_MIN_AGE "$RESOLVE_MIN_AGE" 0
[[ -z $RESOLVE_STALE_SENT ]] || require_int RESOLVE_STALE_SENT "$RESOLVE_STALE_SENT" 0

BIN=$(need_bin resolve)

export RESOLVE_DB=$LEDGER_DB RESOLVE_CORE=$CORE_URL RESOLVE_MIN_AGE
if [[ -n $RESOLVE_STALE_SENT ]]; then
    export RESOLVE_STALE_SENT
else
    unset RESOLVE_STALE_SENT # an empty value would be a parse error in the tool
fi

take_lock
log "running $BIN (ledger $LEDGER_DB, core $CORE_URL, min-age ${RESOLVE_MIN_AGE}s, stale-sent ${RESOLVE_STALE_SENT:-off}, lock $LOCK_FILE)${*:+ with: $*}"
run_stamped "$BIN" "$@"
log "resolve exited $RC"
exit "$RC"
