#!/usr/bin/env bash
# relay.sh: starts the relay from environment settings, for a service manager (systemd
# unit with EnvironmentFile=, runit, supervisord). Validates the settings, logs them on
# stderr, then execs the relay: it keeps this process's PID, receives its signals (SIGTERM
# or SIGINT: finish what is in flight, exit 0) and its exit code is the script's.
# See `relay.sh --help`.
set -euo pipefail

SELF=relay.sh
SCRIPT_DIR=$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")
# shellcheck source=SCRIPTDIR/lib.sh
source "$SCRIPT_DIR/lib.sh"

usage() {
    cat <<'USAGE'
Usage: relay.sh [RELAY-OPTION...]

Starts the relay (exec: same PID, signals and exit code) with settings from the
environment. Empty variables count as unset.

Environment:
  RELAY_DB                  the SQLite ledger, created if missing (required;
                            falls back to LEDGER_DB, the batch scripts' name)
  RELAY_LISTEN              where channels connect; port 0 = any free port
                            [default: 127.0.0.1:9200]
  RELAY_CORE                base URL of the core (falls back to CORE_URL)
                            [default: http://127.0.0.1:9201]
  RELAY_CORE_CA             for an https:// core: CA certificates (PEM) to trust
                            instead of the system's roots
  RELAY_CORE_CERT, RELAY_CORE_KEY
                            for an https:// core: client certificate and key (PEM)
                            for mutual TLS; both or neither
  RELAY_CONNECT_TIMEOUT_MS  connecting to the core; expiry = E902/FAILED  [default: 1000]
  RELAY_READ_TIMEOUT_MS     each later phase of a core call; expiry = E901/UNKNOWN
                            [default: 5000]
  RELAY_FRAME_TIMEOUT_MS    a channel frame from its first byte            [default: 5000]
  RELAY_IDLE_TIMEOUT_SECS   a silent channel connection is closed after    [default: 300]
  RELAY_MAX_CONNECTIONS     connections beyond this are closed at once     [default: 1024]
  RELAY_MAX_CONNECTIONS_PER_PEER
                            connections one source IP may hold             [default: 256]
  RELAY_BIN_DIR             directory holding the relay binary
                            [default: ../bin, else ../target/release, else
                            ../target/debug next to this script, else PATH]
  TXRELAY_ENV_FILE          settings read first, KEY=VALUE lines as systemd reads its
                            EnvironmentFile=; a variable set in the environment wins;
                            empty: none
                            [installed: /etc/txrelay/relay.env; else none]
  RUST_LOG                  log filter                                    [default: info]

The relay reads the RELAY_* variables itself; an option on the command line wins over
them. Its first stdout line is `listening on HOST:PORT`; its log (stderr) lines carry
their own UTC timestamps. This script's own lines on stderr are timestamped (ISO-8601
UTC).

Exit codes:
  0    stopped by SIGTERM/SIGINT after finishing the requests in flight
  1    fatal error of the relay (cannot open the ledger, cannot bind, ...)
  2    usage: bad option (from the relay) or a missing/malformed setting (from relay.sh)
  127  the relay binary was not found
  other: killed by a signal (128 + signal number, as reported by the service manager)
USAGE
    tool_help relay
}

if wants_help "$@"; then
    usage
    exit 0
fi

# Run by hand, an installed relay.sh reads /etc/txrelay/relay.env, as the relay's unit does.
read_settings /etc/txrelay/relay.env
RELAY_DB=${RELAY_DB:-${LEDGER_DB:-}}
[[ -n $RELAY_DB ]] || die "$EXIT_CONFIG" "RELAY_DB is not set: the path of the SQLite ledger is required (see $SELF --help)"
RELAY_LISTEN=${RELAY_LISTEN:-127.0.0.1:9200}
# Before the URL is shown anywhere: credentials in it are refused, not logged.
core_without_credentials RELAY_CORE "$@"
RELAY_CORE=${RELAY_CORE:-${CORE_URL:-http://127.0.0.1:9201}}
RELAY_CONNECT_TIMEOUT_MS=${RELAY_CONNECT_TIMEOUT_MS:-1000}
RELAY_READ_TIMEOUT_MS=${RELAY_READ_TIMEOUT_MS:-5000}
RELAY_FRAME_TIMEOUT_MS=${RELAY_FRAME_TIMEOUT_MS:-5000}
RELAY_IDLE_TIMEOUT_SECS=${RELAY_IDLE_TIMEOUT_SECS:-300}
RELAY_MAX_CONNECTIONS=${RELAY_MAX_CONNECTIONS:-1024}
RELAY_MAX_CONNECTIONS_PER_PEER=${RELAY_MAX_CONNECTIONS_PER_PEER:-256}
require_int RELAY_CONNECT_TIMEOUT_MS "$RELAY_CONNECT_TIMEOUT_MS" 1
require_int RELAY_READ_TIMEOUT_MS "$RELAY_READ_TIMEOUT_MS" 1
require_int RELAY_FRAME_TIMEOUT_MS "$RELAY_FRAME_TIMEOUT_MS" 1
require_int RELAY_IDLE_TIMEOUT_SECS "$RELAY_IDLE_TIMEOUT_SECS" 1
require_int RELAY_MAX_CONNECTIONS "$RELAY_MAX_CONNECTIONS" 1
require_int RELAY_MAX_CONNECTIONS_PER_PEER "$RELAY_MAX_CONNECTIONS_PER_PEER" 1
if [[ $RELAY_LISTEN != *:* ]]; then
    die "$EXIT_CONFIG" "RELAY_LISTEN must be HOST:PORT, got '$RELAY_LISTEN'"
fi
if [[ $RELAY_CORE != http://* && $RELAY_CORE != https://* ]]; then
    die "$EXIT_CONFIG" "RELAY_CORE must be an http:// or https:// URL, got '$(mask_core_url "$RELAY_CORE")'"
fi
pass_through RELAY_CORE_CA RELAY_CORE_CERT RELAY_CORE_KEY
export RELAY_DB RELAY_LISTEN RELAY_CORE RELAY_CONNECT_TIMEOUT_MS RELAY_READ_TIMEOUT_MS \
    RELAY_FRAME_TIMEOUT_MS RELAY_IDLE_TIMEOUT_SECS RELAY_MAX_CONNECTIONS \
    RELAY_MAX_CONNECTIONS_PER_PEER
export RUST_LOG=${RUST_LOG:-info}

BIN=$(need_bin relay)
log "exec $BIN: db $(mask_url "$RELAY_DB"), listen $RELAY_LISTEN, core $(mask_core_url "$RELAY_CORE"), connect-timeout ${RELAY_CONNECT_TIMEOUT_MS}ms, read-timeout ${RELAY_READ_TIMEOUT_MS}ms, frame-timeout ${RELAY_FRAME_TIMEOUT_MS}ms, idle-timeout ${RELAY_IDLE_TIMEOUT_SECS}s, max-connections $RELAY_MAX_CONNECTIONS, max-connections-per-peer $RELAY_MAX_CONNECTIONS_PER_PEER${RELAY_CORE_CA:+, core-ca $RELAY_CORE_CA}${RELAY_CORE_CERT:+, core-cert $RELAY_CORE_CERT}, RUST_LOG=$RUST_LOG${*:+, args: $(shown_args "$@")}"
exec "$BIN" "$@"
