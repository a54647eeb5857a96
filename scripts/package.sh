#!/usr/bin/env bash
# package.sh: builds the Debian package `txrelay` (one .deb with every tool, the operator
# wrappers, /etc/txrelay/{relay,batch}.env, the systemd units and timers, man pages, shell
# completions, the alert rules, dashboard and OpenAPI file, and the docs) and prints its
# path on the last line of stdout.
#
#   scripts/package.sh            # release build, then target/debian/txrelay_*.deb
#   scripts/package.sh --fast     # the same files, compressed faster (a larger .deb; CI's)
#   scripts/package.sh --prepare  # only what the package needs first: cargo-deb installed if
#                                 # missing, the release build (CI runs it while the tests run)
#
# Steps: `cargo build --release` of the packaged tools (scripts/release_build.sh); their man
# pages and completions written by the tools (TXRELAY_GENERATE=DIR, cli/src/generate.rs) into
# target/release/txrelay-docs, the pages compressed as Debian installs them
# (relay.1txrelay.gz); `cargo deb -p relay --no-build` with the metadata of
# crates/relay/Cargo.toml. cargo-deb is installed (`cargo install cargo-deb --locked --debug`)
# when missing. Honours CARGO_TARGET_DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mapfile -t tools < <(bash scripts/release_build.sh --list)
target=${CARGO_TARGET_DIR:-$root/target}

deb_flags=()
prepare=0
case ${1:-} in
    -h | --help)
        sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    --fast) deb_flags+=(--fast) ;;
    --prepare) prepare=1 ;;
    "") ;;
    *)
        echo "package.sh: unknown argument '$1' (usage: scripts/package.sh [--fast | --prepare])" >&2
        exit 2
        ;;
esac

# --debug: unoptimised, cargo-deb builds in half the CPU time (measured: 81 -> 41 CPU seconds)
# and makes the same package, byte for byte, as fast (the compression is its C library's).
if ! cargo deb --version >/dev/null 2>&1; then
    echo "== cargo install cargo-deb --locked --debug" >&2
    cargo install cargo-deb --locked --debug >&2
fi

echo "== scripts/release_build.sh: cargo build --release --locked ${tools[*]/#/-p }" >&2
bash scripts/release_build.sh >&2
((!prepare)) || exit 0

docs="$target/release/txrelay-docs"
echo "== man pages and completions in $docs" >&2
rm -rf "$docs"
for t in "${tools[@]}"; do
    TXRELAY_GENERATE="$docs/gen" "$target/release/$t"
done
# Where each shell looks for a command's completion: bash by the command's name.
mkdir -p "$docs/man" "$docs/bash" "$docs/zsh" "$docs/fish"
# -n: no name or time stamp in the .gz, so that a rebuild gives the same bytes.
for page in "$docs"/gen/man/*.1txrelay; do
    gzip -9n <"$page" >"$docs/man/${page##*/}.gz"
done
for t in "${tools[@]}"; do
    mv "$docs/gen/completions/$t.bash" "$docs/bash/$t"
    mv "$docs/gen/completions/_$t" "$docs/zsh/"
    mv "$docs/gen/completions/$t.fish" "$docs/fish/"
done
rm -rf "$docs/gen"

echo "== cargo deb -p relay --no-build ${deb_flags[*]}" >&2
out=$(cargo deb -p relay --no-build "${deb_flags[@]}")
deb=$(printf '%s\n' "$out" | tail -n 1)
[[ -f $deb ]] || { echo "package.sh: cargo deb printed no package path: $out" >&2; exit 1; }
printf '%s\n' "$deb"
