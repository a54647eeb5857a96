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
  REPROCESS_CORE       the core, for reprocess only: wins over CORE_URL
  REPROCESS_MAX_ATTEMPTS  only rows with fewer attempts than this  [default: 3]
  REPROCESS_LIMIT      send at most this many rows per run, oldest first
                       [default: empty = all]
  REPROCESS_PARALLEL   rows resent at once, 1 to 256  [default: the tool's, 8]
  REPROCESS_CONNECT_TIMEOUT_MS, REPROCESS_READ_TIMEOUT_MS
                       the tool's --connect-timeout-ms and --read-timeout-ms, passed
                       through from the environment unchanged
                       [default: the tool's, 1000 and 5000]
  REPROCESS_CORE_CA, REPROCESS_CORE_CERT, REPROCESS_CORE_KEY
                       for an https:// core: the tool's --core-ca (trusted CA
                       certificates, PEM; default: the system's roots) and
                       --core-cert/--core-key (client certificate for mutual TLS),
                       passed through unchanged
"
    exit 0
fi

# Run by hand, an installed wrapper reads /etc/txrelay/batch.env, as its unit does.
read_settings /etc/txrelay/batch.env
batch_settings reprocess "$@"
# Before the URL is shown anywhere: credentials in it are refused, not logged.
core_without_credentials REPROCESS_CORE "$@"
tool_setting REPROCESS_CORE CORE_URL http://127.0.0.1:9201
REPROCESS_MAX_ATTEMPTS=${REPROCESS_MAX_ATTEMPTS:-3}
REPROCESS_LIMIT=${REPROCESS_LIMIT:-}
require_int REPROCESS_MAX_ATTEMPTS "$REPROCESS_MAX_ATTEMPTS" 1
[[ -z $REPROCESS_LIMIT ]] || require_int REPROCESS_LIMIT "$REPROCESS_LIMIT" 0
export REPROCESS_MAX_ATTEMPTS
pass_through REPROCESS_LIMIT REPROCESS_CONNECT_TIMEOUT_MS REPROCESS_READ_TIMEOUT_MS \
    REPROCESS_CORE_CA REPROCESS_CORE_CERT REPROCESS_CORE_KEY REPROCESS_PARALLEL

BIN=$(need_bin reprocess)

take_lock
log "running $BIN (ledger $SHOWN_DB, core $(effective --core "$REPROCESS_CORE" "$@"), max-attempts $(effective --max-attempts "$REPROCESS_MAX_ATTEMPTS" "$@"), limit $(effective --limit "${REPROCESS_LIMIT:-none}" "$@"), connect-timeout-ms $(effective --connect-timeout-ms "${REPROCESS_CONNECT_TIMEOUT_MS:-default}" "$@"), read-timeout-ms $(effective --read-timeout-ms "${REPROCESS_READ_TIMEOUT_MS:-default}" "$@"), parallel $(effective --parallel "${REPROCESS_PARALLEL:-default}" "$@"), lock $LOCK_FILE)${*:+ with: $(shown_args "$@")}"
run_stamped "$BIN" "$@"
log "reprocess exited $RC"
exit "$RC"
