#!/usr/bin/env bash
# reprocess.sh: resends FAILED/E902 ledger rows (never sent) with their own GUID, never
# overlapping another reprocess.sh on the same ledger.
# Settings come from the environment; see `reprocess.sh --help`.
set -euo pipefail

SELF=reprocess.sh
SCRIPT_DIR=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
# shellcheck source=SCRIPTDIR/lib.sh
source "$SCRIPT_DIR/lib.sh"

if wants_help "$@"; then
    batch_usage reprocess \
        "Resends FAILED rows with rsp_code E902 (proved never sent) and fewer than REPROCESS_MAX_ATTEMPTS attempts." \
        "  CORE_URL             base URL of the core         [default: http://127.0.0.1:9201]
  REPROCESS_MAX_ATTEMPTS  only rows with fewer attempts than this  [default: 3]
  REPROCESS_LIMIT      send at most this many rows per run, oldest first
                       [default: empty = all]
"
    exit 0
fi

batch_settings reprocess
REPROCESS_MAX_ATTEMPTS=${REPROCESS_MAX_ATTEMPTS:-3}
REPROCESS_LIMIT=${REPROCESS_LIMIT:-}
require_int REPROCESS_MAX_ATTEMPTS "$REPROCESS_MAX_ATTEMPTS" 1
[[ -z $REPROCESS_LIMIT ]] || require_int REPROCESS_LIMIT "$REPROCESS_LIMIT" 0

BIN=$(need_bin reprocess)

export REPROCESS_DB=$LEDGER_DB REPROCESS_CORE=$CORE_URL REPROCESS_MAX_ATTEMPTS
if [[ -n $REPROCESS_LIMIT ]]; then
    export REPROCESS_LIMIT
else
    unset REPROCESS_LIMIT # an empty value would be a parse error in the tool
fi

take_lock
log "running $BIN (ledger $LEDGER_DB, core $CORE_URL, max-attempts $REPROCESS_MAX_ATTEMPTS, limit ${REPROCESS_LIMIT:-none}, lock $LOCK_FILE)${*:+ with: $*}"
run_stamped "$BIN" "$@"
log "reprocess exited $RC"
exit "$RC"
