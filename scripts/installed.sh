# shellcheck shell=bash
# Sourced by lib.sh, never run: what a wrapper installed by the Debian package takes itself
# when run by hand. The calling script has set SELF and SCRIPT_DIR (see lib.sh); die and log
# are lib.sh's.

# Where the Debian package puts the wrappers and the ledger (docs/deployment.md, "Installing
# the package"). Its units give the wrappers their settings (EnvironmentFile=, Environment=);
# run by hand, nothing does, so an installed wrapper takes the same itself: the settings file
# (read_settings), the ledger and, for a PostgreSQL ledger, the lock directory (batch_settings).
readonly PKG_SCRIPT_DIR=/opt/txrelay/scripts
readonly PKG_STATE_DIR=/var/lib/txrelay

# True for the wrappers the package installed (not a source tree's).
installed() {
    [[ $SCRIPT_DIR == "$PKG_SCRIPT_DIR" ]]
}

# pkg_default VALUE: prints VALUE for an installed wrapper, nothing in a source tree.
pkg_default() {
    if installed; then
        printf '%s\n' "$1"
    fi
}

# read_settings FILE: reads the wrapper's settings file, as its unit does (EnvironmentFile=):
# the one TXRELAY_ENV_FILE names, if set (set to nothing: none; the units set it so, having
# read the file themselves); else FILE (/etc/txrelay/batch.env, relay.env) for an installed
# wrapper, if it exists; else none. Read as systemd reads it, so that a value means the same
# by hand and under the unit: KEY=VALUE lines, `#` and `;` comments, one pair of quotes
# taken off, no `$` expanded (a password may hold one); a line that is not KEY=VALUE is
# skipped with a warning. A variable the wrapper already has, not empty, wins: what is given
# on the command line (`LEDGER_DB=x resolve.sh`) overrides the file. A file that is there but
# cannot be read is exit 2, naming it: running on without the operator's settings would run
# against the defaults (another core, another ledger).
read_settings() {
    local file line key value n=0
    if [[ -n ${TXRELAY_ENV_FILE+set} ]]; then
        file=$TXRELAY_ENV_FILE
        [[ -n $file ]] || return 0
        [[ -f $file && -r $file ]] || die "$EXIT_CONFIG" "TXRELAY_ENV_FILE=$file is not a readable file"
    elif installed; then
        file=$1
        [[ -e $file ]] || return 0
        [[ -r $file ]] || die "$EXIT_CONFIG" "cannot read $file ($(stat -c '%a %U:%G' -- "$file" 2>/dev/null)): run $SELF as root or as the txrelay user (runuser -u txrelay -- $SCRIPT_DIR/$SELF), or set TXRELAY_ENV_FILE to a file it can read ('' for none)"
    else
        return 0
    fi
    while IFS= read -r line || [[ -n $line ]]; do
        n=$((n + 1))
        line=${line#"${line%%[![:space:]]*}"}
        line=${line%"${line##*[![:space:]]}"}
        [[ -n $line && $line != [#\;]* ]] || continue
        if ! [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*=[[:space:]]*(.*)$ ]]; then
            log "warning: $file line $n is not KEY=VALUE; skipped"
            continue
        fi
        key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
        if [[ $value =~ ^\"(.*)\"$ ]]; then
            value=${BASH_REMATCH[1]}
            value=${value//\\\"/\"}
            value=${value//\\\\/\\}
        elif [[ $value =~ ^\'(.*)\'$ ]]; then
            value=${BASH_REMATCH[1]}
        fi
        [[ -z ${!key:-} ]] || continue
        export "$key=$value"
    done <"$file"
}
