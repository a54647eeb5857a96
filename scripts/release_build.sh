#!/usr/bin/env bash
# release_build.sh: `cargo build --release --locked` of the packaged tools, and with --all of
# the test tools the chaos runs and the benchmark spawn too, each package named (-p), never
# --workspace.
#
#   scripts/release_build.sh            # relay resolve reprocess purge inspect migrate backup
#                                       # restore reconcile: what scripts/package.sh packages
#   scripts/release_build.sh --all      # those, and chaos coresim chan loadgen pkigen
#
# Why named: cargo builds a dependency once per set of features, and a build unifies the
# features of the packages it selects. --workspace selects tools/powerloss (the ledger's
# unsafe-test-switches) and tools/lossyfs (libc's extra_traits, through fuser and nix), so
# libc, ring, tokio, rustls, the ledger and everything above them were built a second time
# after package.sh's build (measured: 156 s of CI's chaos phase). The two lists below select
# the same features for every package they share, so --all after the packaged build compiles
# the test tools alone. Honours CARGO_TARGET_DIR; extra arguments go to cargo (--quiet).
set -euo pipefail

packaged=(relay resolve reprocess purge inspect migrate backup restore reconcile)
test_tools=(chaos coresim chan loadgen pkigen)

pkgs=("${packaged[@]}")
case ${1:-} in
    --all) pkgs+=("${test_tools[@]}"); shift ;;
    --list) printf '%s\n' "${packaged[@]}"; exit 0 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

args=()
for p in "${pkgs[@]}"; do args+=(-p "$p"); done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release --locked "${args[@]}" "$@"
