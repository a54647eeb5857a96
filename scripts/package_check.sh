#!/usr/bin/env bash
# package_check.sh: installs the txrelay package on this machine and checks it, then purges
# it. For CI (as root, on a fresh Debian machine); changes the machine: apt-get, a system
# user `txrelay`, /var/lib/txrelay (kept after the purge, as the package's postrm does).
#
#   scripts/package_check.sh [PATH.deb]    # default: build it with scripts/package.sh
#
# 1. apt-get install ./txrelay_*.deb (and systemd, for systemd-analyze, if missing);
# 2. what is where: the tools, wrappers, units, man pages, completions, docs; the
#    environment files 0640 root:txrelay and conffiles (postinst run again leaves a
#    symlinked one alone), relay.env naming every RELAY_* setting of `relay --help`; the
#    txrelay system user; /var/lib/txrelay 0750;
# 3. `systemd-analyze verify` on every installed unit and timer, and the relay unit's
#    `systemd-analyze security` exposure (at most 2.0: the documented 1.2 plus a margin);
# 4. one transfer through the installed binaries, against the workspace's core simulator
#    and with its channel client (debug builds): with systemd as PID 1, the relay started
#    by `systemctl start txrelay-relay.service` (Type=notify: it returns after READY=1) and
#    a resolve run by `systemctl start txrelay-resolve.service`; otherwise the installed
#    relay run as the txrelay user with /etc/txrelay/relay.env's settings, the core URL and
#    a temp ledger overriding them, and the installed resolve.sh, inspect and backup. The
#    reply must be 0000 and the row DONE;
# 5. apt-get purge txrelay: the files are gone, the ledger directory is kept.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export DEBIAN_FRONTEND=noninteractive
unit_dir=/usr/lib/systemd/system
units=(txrelay-relay.service)
for t in resolve reprocess purge backup reconcile; do units+=("txrelay-$t.service" "txrelay-$t.timer"); done
tools=(relay resolve reprocess purge inspect migrate backup restore reconcile)

fail() {
    echo "package_check: FAILED: $*" >&2
    exit 1
}
step() { printf '== %s\n' "$*"; }

[[ $(id -u) == 0 ]] || fail "run as root (it installs a package)"
deb=${1:-}
if [[ -z $deb ]]; then
    deb=$(bash scripts/package.sh | tail -n 1)
fi
[[ -f $deb ]] || fail "no package at '$deb'"
deb=$(readlink -f -- "$deb")

work=$(mktemp -d)
chmod 0755 "$work" # the txrelay user reaches its ledger directory inside
pids=()
dropin=/run/systemd/system/txrelay-relay.service.d
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -d $dropin ]]; then
        systemctl stop txrelay-relay.service 2>/dev/null || true
        rm -rf "$dropin"
        systemctl daemon-reload 2>/dev/null || true
    fi
    if dpkg -s txrelay >/dev/null 2>&1; then
        apt-get purge -y -qq txrelay >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

step "apt-get install $deb"
if ! command -v systemd-analyze >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
apt-get install -y -qq --no-install-recommends "$deb" >/dev/null
dpkg -s txrelay | grep -q '^Status: install ok installed' || fail "txrelay is not installed"

step "files, modes, conffiles, the txrelay user"
for t in "${tools[@]}"; do
    [[ -x /opt/txrelay/bin/$t ]] || fail "/opt/txrelay/bin/$t missing"
    [[ -f /opt/txrelay/share/man/man1/$t.1 ]] || fail "man page $t.1 missing"
    [[ -f /usr/share/bash-completion/completions/$t ]] || fail "bash completion $t missing"
    [[ -f /usr/share/zsh/vendor-completions/_$t ]] || fail "zsh completion _$t missing"
    [[ -f /usr/share/fish/vendor_completions.d/$t.fish ]] || fail "fish completion $t missing"
done
for s in lib.sh relay.sh resolve.sh reprocess.sh purge.sh reconcile.sh; do
    [[ -f /opt/txrelay/scripts/$s ]] || fail "/opt/txrelay/scripts/$s missing"
done
for u in "${units[@]}"; do [[ -f $unit_dir/$u ]] || fail "$unit_dir/$u missing"; done
[[ -f /usr/share/doc/txrelay/docs/deployment.md ]] || fail "docs missing"
getent passwd txrelay >/dev/null || fail "no txrelay user"
uid=$(id -u txrelay)
((uid < 1000)) || fail "txrelay is not a system user (uid $uid)"
for f in /etc/txrelay/relay.env /etc/txrelay/batch.env; do
    [[ $(stat -c '%a %U:%G' "$f") == "640 root:txrelay" ]] ||
        fail "$f is $(stat -c '%a %U:%G' "$f"), want 640 root:txrelay"
    grep -qx "$f" /var/lib/dpkg/info/txrelay.conffiles || fail "$f is not a conffile"
done
[[ $(stat -c '%a %U:%G' /var/lib/txrelay) == "750 txrelay:txrelay" ]] ||
    fail "/var/lib/txrelay is $(stat -c '%a %U:%G' /var/lib/txrelay)"
# Every environment twin of the relay's flags is in relay.env (commented, with its default).
missing=()
while read -r var; do
    grep -q "^#$var=" /etc/txrelay/relay.env || missing+=("$var")
done < <(/opt/txrelay/bin/relay --help | sed -n 's/.*\[env: \(RELAY_[A-Z_]*\).*/\1/p' | sort -u)
((${#missing[@]} == 0)) || fail "relay.env does not name ${missing[*]}"
echo "ok: $(dpkg -L txrelay | wc -l) paths; user txrelay (uid $uid); env files 0640 root:txrelay"
# postinst again, batch.env a symbolic link: the link is left alone, with one line, and
# its target keeps its owner and mode (chown/chmod would follow the link).
mv /etc/txrelay/batch.env "$work/batch.env.kept"
install -m 0600 /dev/null "$work/linked.env"
ln -s "$work/linked.env" /etc/txrelay/batch.env
said=$(/var/lib/dpkg/info/txrelay.postinst configure)
[[ $(stat -c '%a %U:%G' "$work/linked.env") == "600 root:root" ]] ||
    fail "postinst changed a symlinked batch.env's target to $(stat -c '%a %U:%G' "$work/linked.env")"
grep -q '/etc/txrelay/batch.env is a symbolic link: left alone' <<<"$said" ||
    fail "postinst did not say it left the symlinked batch.env alone: $said"
rm /etc/txrelay/batch.env
mv "$work/batch.env.kept" /etc/txrelay/batch.env
echo "ok: postinst leaves a symlinked env file alone: $said"

step "systemd-analyze verify (units and timers)"
# The man pages are found through PATH (/etc/profile.d/txrelay.sh), as in a login shell;
# without man(1) their check is skipped.
man_check=()
command -v man >/dev/null || man_check=(--man=no)
PATH="$PATH:/opt/txrelay/bin" systemd-analyze verify "${man_check[@]}" "${units[@]/#/$unit_dir/}"
echo "ok: ${#units[@]} units"
exposure=$(systemd-analyze security --offline=true "$unit_dir/txrelay-relay.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for txrelay-relay.service: \([0-9.]*\).*/\1/p')
[[ -n $exposure ]] || fail "no exposure level from systemd-analyze security"
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || fail "exposure $exposure > 2.0"
echo "ok: systemd-analyze security txrelay-relay.service: $exposure"

step "one transfer through the installed binaries"
cargo build --quiet -p chan -p coresim
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
# wait_line FILE: the address of the first `listening on` line in FILE (30 s at most).
wait_line() {
    local file=$1 deadline=$((SECONDS + 30))
    until grep -q '^listening on ' "$file" 2>/dev/null; do
        ((SECONDS < deadline)) || { cat "$file" "$file.err" 2>/dev/null >&2; fail "no 'listening on' in $file"; }
        sleep 0.05
    done
    sed -n 's/^listening on //p' "$file" | head -n 1
}
"$bin/coresim" --listen 127.0.0.1:0 >"$work/core.out" 2>"$work/core.out.err" &
pids+=($!)
core=$(wait_line "$work/core.out")
guid="PKG-$(date +%s)"

if [[ $(ps -p 1 -o comm=) == systemd ]]; then
    echo "systemd is PID 1: systemctl start txrelay-relay.service"
    mkdir -p "$dropin"
    printf '[Service]\nEnvironment=RELAY_CORE=http://%s\nEnvironment=RELAY_LISTEN=127.0.0.1:0\n' \
        "$core" >"$dropin/ci.conf"
    systemctl daemon-reload
    since=$(date '+%Y-%m-%d %H:%M:%S')
    systemctl start txrelay-relay.service # Type=notify: returns once READY=1 came
    [[ $(systemctl show -p ActiveState --value txrelay-relay.service) == active ]] ||
        fail "txrelay-relay.service is not active"
    relay=$(journalctl -u txrelay-relay.service --since "$since" -o cat | sed -n 's/^listening on //p' | tail -n 1)
    [[ -n $relay ]] || fail "no 'listening on' in the journal"
    ledger=/var/lib/txrelay/ledger.db
else
    echo "PID 1 is $(ps -p 1 -o comm=), not systemd: the relay as the txrelay user, outside systemd"
    ledger_dir="$work/ledger"
    install -d -o txrelay -g txrelay -m 0750 "$ledger_dir"
    ledger="$ledger_dir/ledger.db"
    (
        set -a
        # shellcheck source=/dev/null
        . /etc/txrelay/relay.env
        set +a
        export RELAY_DB="$ledger" RELAY_CORE="http://$core" RELAY_LISTEN=127.0.0.1:0
        exec setpriv --reuid txrelay --regid txrelay --init-groups /opt/txrelay/bin/relay
    ) >"$work/relay.out" 2>"$work/relay.out.err" &
    relay_pid=$!
    pids+=("$relay_pid")
    relay=$(wait_line "$work/relay.out")
fi
echo "core simulator on $core, installed relay on $relay, ledger $ledger"

reply=$("$bin/chan" --relay "$relay" --guid "$guid" --amount 1500 --memo package)
echo "reply: $reply"
[[ $(awk '{print $2}' <<<"$reply") == 0000 ]] || fail "reply code is not 0000: $reply"
as_txrelay() { setpriv --reuid txrelay --regid txrelay --init-groups "$@"; }
as_txrelay /opt/txrelay/bin/inspect --db "$ledger" show "$guid" | tee "$work/show"
grep -q '^state: *DONE$' "$work/show" || fail "$guid is not DONE in the ledger"
# The core's own count: booked once.
exec 3<>"/dev/tcp/${core%:*}/${core##*:}"
printf 'GET /_stats HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$core" >&3
stats=$(sed -n '/^\r$/,$p' <&3 | tail -n +2)
exec 3<&-
[[ $stats == *"\"$guid\":1"* ]] || fail "the core's bookings of $guid are not 1: $stats"

if [[ $(ps -p 1 -o comm=) == systemd ]]; then
    printf 'CORE_URL=http://%s\n' "$core" >>/etc/txrelay/batch.env
    systemctl start txrelay-resolve.service txrelay-backup.service
    systemctl stop txrelay-relay.service
    [[ $(systemctl show -p Result --value txrelay-relay.service) == success ]] ||
        fail "txrelay-relay.service did not stop cleanly"
    ls /var/lib/txrelay/backups/ledger-*.db >/dev/null || fail "txrelay-backup.service wrote no backup"
else
    # The installed wrapper (and lib.sh) with the timer unit's settings.
    as_txrelay env LEDGER_DB="$ledger" CORE_URL="http://$core" RELAY_BIN_DIR=/opt/txrelay/bin \
        /opt/txrelay/scripts/resolve.sh --stale-sent 900
    as_txrelay /opt/txrelay/bin/backup --db "$ledger" --to "$ledger_dir/backup.db"
    kill -TERM "$relay_pid"
    wait "$relay_pid" || fail "the relay exited $? after SIGTERM"
    grep -q 'shut down cleanly' "$work/relay.out.err" || fail "no clean shutdown"
fi
echo "ok: $guid booked once through the installed relay"

step "apt-get purge txrelay"
apt-get purge -y -qq txrelay >/dev/null
for p in /opt/txrelay/bin/relay /etc/txrelay/relay.env "$unit_dir/txrelay-relay.service"; do
    [[ ! -e $p ]] || fail "$p is still there after the purge"
done
[[ -d /var/lib/txrelay ]] || fail "the purge deleted /var/lib/txrelay (the ledger must be kept)"
echo "ok: purged; /var/lib/txrelay kept"
echo "package_check: ok"
