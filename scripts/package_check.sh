#!/usr/bin/env bash
# package_check.sh: installs the txrelay package on this machine and checks it, then purges
# what it installed. For CI (as root, on a Debian machine); changes the machine: apt-get
# (systemd and man-db if missing), a system user `txrelay`, /var/lib/txrelay (kept after the
# purge, as the package's postrm does).
#
#   scripts/package_check.sh [PATH.deb]    # default: build it with scripts/package.sh
#
# An installation it did not make is never destroyed. Where txrelay is already installed
# (or removed with its configuration kept), the package is upgraded to the build under test
# (--force-confold) and not purged: the upgrade must keep /etc/txrelay as it was (checked:
# every file's owner and mode, and the content of all but the conffiles nobody edited, which
# an upgrade may renew), the checks' changes there are undone at the end (checked), and the
# transfer runs outside systemd against a temp ledger, leaving the running units, their
# settings and their ledger alone; the package is left installed (or removed again, its
# configuration kept). Only an installation this script made is purged: it marks it
# (/etc/txrelay/.package_check) before installing, so that one left behind by a run that was
# killed is purged by the next run.
#
# 1. apt-get install ./txrelay_*.deb;
# 2. what is where: the tools, wrappers, units, man pages, completions, docs, the alert
#    rules, dashboard and OpenAPI file in /usr/share/txrelay (in `dpkg -L txrelay`); the
#    environment files 0640 root:txrelay on a first install (else as they were), conffiles
#    (postinst run again leaves a symlinked one alone, and as an upgrade leaves a 0600 one
#    0600), relay.env naming every RELAY_* setting of `relay --help`; the txrelay system
#    user; /var/lib/txrelay 0750;
# 3. in a shell with the default PATH (no /opt/txrelay/bin): `man -w` finds every tool's
#    page in /usr/share/man, `man relay` and `man restore` show EXIT STATUS, ENVIRONMENT,
#    FILES and SEE ALSO; `systemd-analyze verify` on every unit and timer (it runs `man` for
#    their Documentation=man:...); the relay unit's `systemd-analyze security` exposure (at
#    most 2.0: the documented 1.2 plus a margin);
# 4. one transfer through the installed binaries, against the workspace's core simulator
#    and with its channel client (debug builds): with systemd as PID 1 (and a first
#    install), the relay started by `systemctl start txrelay-relay.service` (Type=notify: it
#    returns after READY=1) and a resolve run by `systemctl start txrelay-resolve.service`;
#    otherwise the installed relay run as the txrelay user with /etc/txrelay/relay.env's
#    settings, the core URL and a temp ledger overriding them, and the installed backup.
#    The reply must be 0000 and the row DONE. Then, in a shell with the default PATH, the
#    installed resolve.sh run by hand as txrelay with only /etc/txrelay/batch.env naming
#    the ledger and the core, and purge.sh by hand as root (its lock file must be txrelay's);
# 5. apt-get purge txrelay (what this run installed): the files are gone, the ledger
#    directory is kept. Or, for an installation found here: /etc/txrelay as it was.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export DEBIAN_FRONTEND=noninteractive
unit_dir=/usr/lib/systemd/system
units=(txrelay-relay.service)
for t in resolve reprocess purge backup reconcile; do units+=("txrelay-$t.service" "txrelay-$t.timer"); done
tools=(relay resolve reprocess purge inspect migrate backup restore reconcile)
etc=/etc/txrelay
marker=$etc/.package_check
# A login-less shell's PATH, as systemd-analyze and an operator's `sudo -i` without
# /etc/profile.d have it: the Done-when of issue 40 is judged there.
default_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

fail() {
    echo "package_check: FAILED: $*" >&2
    exit 1
}
step() { printf '== %s\n' "$*"; }
# plain [VAR=VALUE...] CMD...: CMD with nothing of this shell's environment but the
# default PATH (and the VARs).
plain() { env -i PATH="$default_path" "$@"; }
as_txrelay() { setpriv --reuid txrelay --regid txrelay --init-groups "$@"; }
# snapshot [PATH...]: every entry of /etc/txrelay with its type, mode, owner and link
# target, and each file's content hash but those of the PATHs (./relay.env), for comparing
# /etc/txrelay before and after.
snapshot() {
    local skip=" $* "
    (cd "$etc" && find . -printf '%p %y %m %u:%g %l\n' | LC_ALL=C sort &&
        find . -type f -exec md5sum {} + | LC_ALL=C sort -k 2 |
        while read -r sum path; do [[ $skip == *" $path "* ]] || echo "$sum $path"; done)
}

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

# What was here before: nothing (a fresh install, purged at the end), a leftover of an
# earlier run of this script (its mark: purged first, then as fresh), or an installation
# someone made (kept: mode=keep).
status=$(dpkg-query -W -f='${Status}' txrelay 2>/dev/null || true)
if [[ -n $status && $status != *" not-installed" && -e $marker ]]; then
    step "txrelay left installed by an earlier run of package_check ($marker): purged first"
    rm -f "$marker"
    apt-get purge -y -qq txrelay >/dev/null
    rmdir "$etc" 2>/dev/null || true
    status=
fi
mode=fresh
if [[ -n $status && $status != *" not-installed" ]]; then
    mode=keep
    was=$(dpkg-query -W -f='${Version}' txrelay)
    echo "txrelay $was is here already ($status), not installed by this script: /etc/txrelay is kept" \
        "as it is and put back at the end, the package upgraded to the build under test and not purged"
    [[ -d $etc ]] || fail "$etc is missing: nothing to keep, and no way to tell the package's files from yours"
    # The conffiles as the package installed them (dpkg's hash): an upgrade may put the new
    # version's in their place, as any upgrade does. Every other file's content, and every
    # entry's owner and mode, must come through the upgrade as they were.
    unedited=()
    while read -r path sum _; do
        [[ $path == "$etc"/* && -f $path && ! -L $path ]] || continue
        [[ $(md5sum <"$path" | cut -d' ' -f1) == "$sum" ]] && unedited+=("./${path#"$etc"/}")
    done < <(dpkg-query -W -f='${Conffiles}\n' txrelay)
    cp -a "$etc" "$work/etc.before.d"
    snapshot "${unedited[@]}" >"$work/etc.before"
fi
restored=0
# restore_etc: /etc/txrelay put back as the upgrade left it (keep mode), or, if the run
# failed before that was copied, as it was before.
restore_etc() {
    local kept=$work/etc.after.d
    [[ -d $kept ]] || kept=$work/etc.before.d
    rm -rf "$etc"
    cp -a "$kept" "$etc"
    restored=1
}

cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -d $dropin ]]; then
        systemctl stop txrelay-relay.service 2>/dev/null || true
        rm -rf "$dropin"
        systemctl daemon-reload 2>/dev/null || true
    fi
    if [[ $mode == fresh ]]; then
        rm -f "$marker"
        if dpkg -s txrelay >/dev/null 2>&1; then
            apt-get purge -y -qq txrelay >/dev/null 2>&1 || true
        fi
        rmdir "$etc" 2>/dev/null || true
    elif ((!restored)); then
        if [[ $status == *" config-files" ]] && dpkg -s txrelay 2>/dev/null | grep -q '^Status: install ok installed'; then
            apt-get remove -y -qq txrelay >/dev/null 2>&1 || true
        fi
        [[ ! -d $work/etc.before.d ]] || restore_etc
    fi
    rm -rf "$work"
}
trap cleanup EXIT

step "apt-get install $deb"
if ! command -v systemd-analyze >/dev/null || ! command -v man >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends systemd man-db >/dev/null
fi
if [[ $mode == fresh ]]; then
    # Marked before dpkg runs: a run killed at any later point leaves a mark for the next.
    mkdir -p "$etc"
    echo "installed by scripts/package_check.sh (pid $$) on $(date -u +%FT%TZ); the next run purges it" >"$marker"
fi
# --reinstall: the same version as the one here must be installed again all the same;
# confold: an edited conffile of an installation found here stays as it is.
apt-get install -y -qq --no-install-recommends --reinstall --allow-downgrades \
    -o Dpkg::Options::=--force-confold -o Dpkg::Options::=--force-confdef "$deb" >/dev/null
dpkg -s txrelay | grep -q '^Status: install ok installed' || fail "txrelay is not installed"

step "files, modes, conffiles, the txrelay user"
for t in "${tools[@]}"; do
    [[ -x /opt/txrelay/bin/$t ]] || fail "/opt/txrelay/bin/$t missing"
    [[ -f /usr/share/man/man1/$t.1txrelay.gz ]] || fail "man page $t.1txrelay.gz missing"
    [[ -f /usr/share/bash-completion/completions/$t ]] || fail "bash completion $t missing"
    [[ -f /usr/share/zsh/vendor-completions/_$t ]] || fail "zsh completion _$t missing"
    [[ -f /usr/share/fish/vendor_completions.d/$t.fish ]] || fail "fish completion $t missing"
done
for s in lib.sh installed.sh relay.sh resolve.sh reprocess.sh purge.sh reconcile.sh; do
    [[ -f /opt/txrelay/scripts/$s ]] || fail "/opt/txrelay/scripts/$s missing"
done
for u in "${units[@]}"; do [[ -f $unit_dir/$u ]] || fail "$unit_dir/$u missing"; done
[[ -f /usr/share/doc/txrelay/docs/deployment.md ]] || fail "docs missing"
# What docs/operations.md (Monitoring) has the operator load, listed as the package's own.
listed=$(dpkg -L txrelay)
for f in /usr/share/txrelay/alerts/txrelay.rules.yml /usr/share/txrelay/alerts/grafana-dashboard.json \
    /usr/share/txrelay/alerts/txrelay.rules.test.yml /usr/share/txrelay/openapi.yaml; do
    grep -qx "$f" <<<"$listed" || fail "dpkg -L txrelay does not list $f"
done
if command -v promtool >/dev/null; then
    promtool check rules /usr/share/txrelay/alerts/txrelay.rules.yml >/dev/null ||
        fail "promtool check rules on the installed rules"
    promtool test rules /usr/share/txrelay/alerts/txrelay.rules.test.yml >/dev/null ||
        fail "promtool test rules on the installed rules"
fi
getent passwd txrelay >/dev/null || fail "no txrelay user"
uid=$(id -u txrelay)
((uid < 1000)) || fail "txrelay is not a system user (uid $uid)"
for f in $etc/relay.env $etc/batch.env; do
    grep -qx "$f" /var/lib/dpkg/info/txrelay.conffiles || fail "$f is not a conffile"
    # A first install makes them root:txrelay 0640; an upgrade keeps what was there.
    if [[ $mode == fresh ]]; then
        [[ $(stat -c '%a %U:%G' "$f") == "640 root:txrelay" ]] ||
            fail "$f is $(stat -c '%a %U:%G' "$f"), want 640 root:txrelay"
    fi
done
if [[ $mode == keep ]]; then
    snapshot "${unedited[@]}" | diff "$work/etc.before" - >&2 ||
        fail "the upgrade changed $etc (above: < before, > after)"
    snapshot >"$work/etc.after"
    cp -a "$etc" "$work/etc.after.d"
    echo "ok: $etc through the upgrade as it was (your files' content, every owner and mode)"
fi
[[ $(stat -c '%a %U:%G' /var/lib/txrelay) == "750 txrelay:txrelay" ]] ||
    fail "/var/lib/txrelay is $(stat -c '%a %U:%G' /var/lib/txrelay)"
# Every environment twin of the relay's flags is in relay.env (commented, with its default);
# the package's own relay.env, which an installation found here may have edited.
missing=()
packaged_env=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/txrelay/relay.env)
while read -r var; do
    grep -q "^#$var=" <<<"$packaged_env" || missing+=("$var")
done < <(/opt/txrelay/bin/relay --help | sed -n 's/.*\[env: \(RELAY_[A-Z_]*\).*/\1/p' | sort -u)
((${#missing[@]} == 0)) || fail "relay.env does not name ${missing[*]}"
echo "ok: $(wc -l <<<"$listed") paths; user txrelay (uid $uid); env files conffiles"
# postinst again, batch.env a symbolic link: the link is left alone, with one line, and
# its target keeps its owner and mode (chown/chmod would follow the link). /etc/txrelay is
# put back below (keep mode) or purged.
cp -a $etc/batch.env "$work/batch.env.kept"
rm -f $etc/batch.env
install -m 0600 /dev/null "$work/linked.env"
ln -s "$work/linked.env" $etc/batch.env
said=$(/var/lib/dpkg/info/txrelay.postinst configure)
[[ $(stat -c '%a %U:%G' "$work/linked.env") == "600 root:root" ]] ||
    fail "postinst changed a symlinked batch.env's target to $(stat -c '%a %U:%G' "$work/linked.env")"
grep -q '/etc/txrelay/batch.env is a symbolic link: left alone' <<<"$said" ||
    fail "postinst did not say it left the symlinked batch.env alone: $said"
rm $etc/batch.env
cp -a "$work/batch.env.kept" $etc/batch.env
echo "ok: postinst leaves a symlinked env file alone: $said"
# postinst as an upgrade (configure OLD-VERSION): an operator's tighter mode stays.
chmod 0600 $etc/relay.env
/var/lib/dpkg/info/txrelay.postinst configure 0.0.0-1 >/dev/null
[[ $(stat -c '%a' $etc/relay.env) == 600 ]] ||
    fail "postinst as an upgrade made a 0600 relay.env $(stat -c '%a %U:%G' $etc/relay.env)"
chmod 0640 $etc/relay.env
echo "ok: postinst as an upgrade leaves a 0600 relay.env 0600"

step "man pages and units, in a shell with the default PATH ($default_path)"
for t in "${tools[@]}"; do
    page=$(plain man -w "$t" 2>&1) || fail "man -w $t: $page"
    [[ $page == /usr/share/man/man1/$t.1txrelay.gz ]] || fail "man -w $t found $page, not the package's page"
done
for t in relay restore; do
    text=$(plain MANWIDTH=100 man -P cat "$t" 2>/dev/null) || fail "man $t failed"
    for section in "EXIT STATUS" ENVIRONMENT FILES "SEE ALSO"; do
        grep -qx "$section" <<<"$text" || fail "man $t has no $section section"
    done
done
grep -q '/etc/txrelay/relay.env' <<<"$(plain MANWIDTH=100 man -P cat relay 2>/dev/null)" ||
    fail "man relay does not name /etc/txrelay/relay.env"
echo "ok: man -w finds ${#tools[@]} pages in /usr/share/man/man1; man relay and man restore have their sections"
# systemd-analyze runs `man SECTION PAGE` for each Documentation=man:PAGE(SECTION).
plain systemd-analyze verify "${units[@]/#/$unit_dir/}"
echo "ok: systemd-analyze verify: ${#units[@]} units"
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

# Under systemd only on an installation of this run's own: one found here has its units,
# its settings and its ledger, which are not this check's to start, stop or write.
use_systemd=0
[[ $(ps -p 1 -o comm=) == systemd && $mode == fresh ]] && use_systemd=1
if ((use_systemd)); then
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
    ledger_dir=/var/lib/txrelay
else
    why="PID 1 is $(ps -p 1 -o comm=)"
    [[ $mode == fresh ]] || why="txrelay was here before this run"
    echo "the relay as the txrelay user, outside systemd ($why)"
    ledger_dir="$work/ledger"
    install -d -o txrelay -g txrelay -m 0750 "$ledger_dir"
    ledger="$ledger_dir/ledger.db"
    (
        # The package's relay.env, as the unit reads it; not the settings of an
        # installation found here (its admin port, TLS, ...), which are not this check's.
        if [[ $mode == fresh ]]; then
            set -a
            # shellcheck source=/dev/null
            . /etc/txrelay/relay.env
            set +a
        fi
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
as_txrelay /opt/txrelay/bin/inspect --db "$ledger" show "$guid" | tee "$work/show"
grep -q '^state: *DONE$' "$work/show" || fail "$guid is not DONE in the ledger"
# The core's own count: booked once.
exec 3<>"/dev/tcp/${core%:*}/${core##*:}"
printf 'GET /_stats HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$core" >&3
stats=$(sed -n '/^\r$/,$p' <&3 | tail -n +2)
exec 3<&-
[[ $stats == *"\"$guid\":1"* ]] || fail "the core's bookings of $guid are not 1: $stats"

# The wrappers by hand, as an operator runs them after the install: a shell with the
# default PATH and nothing else, /etc/txrelay/batch.env the only place that names the
# ledger and the core, the tools found in /opt/txrelay/bin beside the scripts.
rm -f $etc/batch.env
printf '# package_check.sh: the settings of a run by hand\nLEDGER_DB=%s\nCORE_URL=http://%s\n' \
    "$ledger" "$core" >$etc/batch.env
chown root:txrelay $etc/batch.env
chmod 0640 $etc/batch.env
out=$(plain setpriv --reuid txrelay --regid txrelay --init-groups \
    /opt/txrelay/scripts/resolve.sh --stale-sent 900 2>&1) || fail "resolve.sh by hand exited $?: $out"
grep -q "resolve.sh: running /opt/txrelay/bin/resolve (ledger $ledger, core http://$core," <<<"$out" ||
    fail "resolve.sh by hand did not run the installed resolve with batch.env's ledger and core: $out"
echo "ok: resolve.sh by hand as txrelay, settings from $etc/batch.env: $(grep -m1 'resolve: ' <<<"$out")"
# As root (sudo): the lock file it makes is the txrelay user's, or the timer's next run
# could not open it.
rm -f "$ledger.purge.lock"
out=$(plain /opt/txrelay/scripts/purge.sh --dry-run 2>&1) || fail "purge.sh --dry-run by hand exited $?: $out"
[[ $(stat -c %U "$ledger.purge.lock") == txrelay ]] ||
    fail "purge.sh by hand as root left $ledger.purge.lock $(stat -c %U:%G "$ledger.purge.lock")"
echo "ok: purge.sh --dry-run by hand as root; its lock file is txrelay's"

if ((use_systemd)); then
    printf 'CORE_URL=http://%s\n' "$core" >>$etc/batch.env
    # The unit's own floor is a tenth of the disk (`%%` in the unit); this test host's disk
    # is not the bank's, so batch.env lowers it, as an operator may.
    [[ $(systemctl show -p Environment --value txrelay-backup.service) == *BACKUP_MIN_FREE=10%* ]] ||
        fail "txrelay-backup.service does not set BACKUP_MIN_FREE=10%"
    echo 'BACKUP_MIN_FREE=0' >>$etc/batch.env
    systemctl start txrelay-resolve.service txrelay-backup.service
    systemctl stop txrelay-relay.service
    [[ $(systemctl show -p Result --value txrelay-relay.service) == success ]] ||
        fail "txrelay-relay.service did not stop cleanly"
    ls /var/lib/txrelay/backups/ledger-*.db >/dev/null || fail "txrelay-backup.service wrote no backup"
else
    as_txrelay /opt/txrelay/bin/backup --db "$ledger" --to "$ledger_dir/backup.db"
    kill -TERM "$relay_pid"
    wait "$relay_pid" || fail "the relay exited $? after SIGTERM"
    grep -q 'shut down cleanly' "$work/relay.out.err" || fail "no clean shutdown"
fi
echo "ok: $guid booked once through the installed relay"

if [[ $mode == keep ]]; then
    step "$etc put back (txrelay was here before this run: not purged)"
    left="installed, at the build under test"
    if [[ $status == *" config-files" ]]; then
        apt-get remove -y -qq txrelay >/dev/null
        left="removed again, its configuration kept"
    fi
    restore_etc
    snapshot | diff "$work/etc.after" - >&2 || fail "$etc is not as the upgrade left it (above: < then, > now)"
    echo "ok: $etc as the upgrade left it, which kept your files, owners and modes; txrelay $left"
    echo "package_check: ok"
    exit 0
fi

step "apt-get purge txrelay"
rm -f "$marker"
apt-get purge -y -qq txrelay >/dev/null
for p in /opt/txrelay/bin/relay $etc/relay.env "$unit_dir/txrelay-relay.service" \
    /usr/share/man/man1/relay.1txrelay.gz /usr/share/txrelay; do
    [[ ! -e $p ]] || fail "$p is still there after the purge"
done
[[ -d /var/lib/txrelay ]] || fail "the purge deleted /var/lib/txrelay (the ledger must be kept)"
echo "ok: purged; /var/lib/txrelay kept"
echo "package_check: ok"
