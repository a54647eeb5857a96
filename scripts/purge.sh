#!/usr/bin/env bash
# purge.sh: deletes DONE ledger rows older than PURGE_DAYS days, never overlapping another
# purge.sh on the same ledger.
# Settings come from the environment; see `purge.sh --help`.
set -euo pipefail

SELF=purge.sh
SCRIPT_DIR=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
# shellcheck source=SCRIPTDIR/lib.sh
source "$SCRIPT_DIR/lib.sh"

if wants_help "$@"; then
    batch_usage purge \
        "Deletes DONE rows last changed more than PURGE_DAYS days ago; rows in any other state stay." \
        "  PURGE_DAYS           retention in days; must exceed the longest time a channel
                       may resend a GUID (a resend after the purge books again)
                       [default: 90]
"
    exit 0
fi

batch_settings purge
PURGE_DAYS=${PURGE_DAYS:-90}
require_int PURGE_DAYS "$PURGE_DAYS" 0

BIN=$(need_bin purge)

export PURGE_DB=$LEDGER_DB PURGE_DAYS

take_lock
log "running $BIN (ledger $LEDGER_DB, days $PURGE_DAYS, lock $LOCK_FILE)${*:+ with: $*}"
run_stamped "$BIN" "$@"
log "purge exited $RC"
exit "$RC"
