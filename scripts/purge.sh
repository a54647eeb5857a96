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
        "  PURGE_DAYS           retention in days, at least 1; must exceed the longest time a
                       channel may resend a GUID (a resend after the purge books again)
                       [default: 90]. PURGE_DAYS=0 (every DONE row, whatever its
                       age) is refused unless --force is passed as an argument:
                       PURGE_DAYS=0 $SELF --force
"
    exit 0
fi

# Run by hand, an installed wrapper reads /etc/txrelay/batch.env, as its unit does.
read_settings /etc/txrelay/batch.env
batch_settings purge "$@"
PURGE_DAYS=${PURGE_DAYS:-90}
require_int PURGE_DAYS "$PURGE_DAYS" 0
if ((10#$PURGE_DAYS < 1)) && ! has_arg --force "$@"; then
    die "$EXIT_CONFIG" "PURGE_DAYS=$PURGE_DAYS would delete every DONE row (a resend of a purged GUID is booked again); PURGE_DAYS must be >= 1, or pass --force to mean it"
fi
export PURGE_DAYS

BIN=$(need_bin purge)

take_lock
log "running $BIN (ledger $SHOWN_DB, days $(effective --days "$PURGE_DAYS" "$@"), lock $LOCK_FILE)${*:+ with: $(shown_args "$@")}"
run_stamped "$BIN" "$@"
log "purge exited $RC"
exit "$RC"
