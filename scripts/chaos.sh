#!/usr/bin/env bash
# Chaos run: builds the workspace binaries (release) and runs target/release/chaos with the
# arguments given. Many channels send transfers while the relay is SIGKILLed every few
# seconds and the core goes away now and then, resolve and reprocess run alongside; then it
# settles what is left, checks that no GUID was booked twice and ends with `reconcile` over
# the ledger and the core's booking journal (0 breaks required). Exit 0: no violation;
# 1: violations (printed with GUID and evidence); 2: the run could not be carried out.
#
#   scripts/chaos.sh [--secs 60] [--seed N] [--channels 32] [--work-dir DIR] [--keep]
#                    [--backend sqlite|postgres] [--relays N] [--tls] [--http]
#
# With --backend postgres the run starts a PostgreSQL cluster of its own (the server
# binaries must be installed; it refuses in one line otherwise) and restarts it in immediate
# mode every 5-10 s; with --relays N, N relays share the ledger and resends mostly go to
# another relay than the first send. The seed is always printed: the same --seed replays the
# same actions, routes and kill schedule (database restarts included). With --tls the
# channels speak mutual TLS to the relays with two channel identities (certificates made by
# the run in its work dir).
set -euo pipefail

if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
    cat <<'USAGE'
usage: scripts/chaos.sh [chaos flags]

Builds with `scripts/release_build.sh --all` and runs target/release/chaos.
Flags (passed through):
  --secs N        how long the traffic and the kills go on (default 60)
  --seed N        seed of the channels' actions and routes and of the kill schedule
                  (default: clock)
  --channels N    channel threads (default 32)
  --backend B     sqlite (default: a file in the work dir) or postgres (a PostgreSQL
                  cluster of the run's own, restarted in immediate mode every 5-10 s)
  --relays N      relays sharing the ledger, each on its own port (default 1)
  --db URL        a PostgreSQL ledger the run does not own (not with --backend): no database
                  restarts by the run; a watch records when no host is writable, and a relay
                  that cannot start meanwhile is started again as a supervisor would
                  (scripts/chaos_failover.sh runs it through a failover)
  --tls           channels over mutual TLS: the run makes a CA, the relays' certificate
                  and two channel identities (channel-a: even channels, channel-b: odd);
                  relays get --tls-cert, --tls-key and --client-ca
  --http          relays also get --http-listen; every third channel sends 3 in 4 of its
                  requests through the HTTP door, the others 1 in 4 (resends cross
                  doors); the answers are held to the same checks. Not with --tls
  --bin-dir DIR   where the workspace binaries are (default: next to chaos)
  --work-dir DIR  parent of the run's temp dir (default: the system temp dir)
  --keep          keep the temp dir (ledger, journal, logs) and print its path
Exit: 0 no violation, 1 violations, 2 the run could not be carried out, 130 interrupted.
USAGE
    exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/release_build.sh --all --quiet
exec "${CARGO_TARGET_DIR:-$root/target}/release/chaos" "$@"
