#!/usr/bin/env bash
# Keep opsbot's apply from running while its code is replaced, never cutting one that runs:
#   apply-hold.sh hold [SECONDS]   stop the triggers of opsbot-apply.service (its path and
#                                  timer, those that run), then wait up to SECONDS (600) for
#                                  an apply that runs to finish; if it still runs then, start
#                                  the triggers again and exit 1 (nothing was touched)
#   apply-hold.sh release          start again the triggers `hold` stopped
# Used by packaging/install.sh (upgrade and --uninstall) and the Debian package's
# maintainer scripts (packaging/deb/debian: preinst and prerm hold, postinst releases);
# APPLY_HOLD_WAIT_HINT: how the caller is told to wait longer.
set -euo pipefail

held=/run/opsbot-apply-held
apply=opsbot-apply.service

release() {
    [ -f "$held" ] || return 0
    local units
    units=$(cat "$held")
    if [ -n "$units" ]; then
        # shellcheck disable=SC2086  # unit names, one a word
        systemctl start $units || true
    fi
    rm -f "$held"
}

running() {
    local state
    state=$(systemctl show --property=ActiveState --value "$apply" 2>/dev/null || true)
    case "$state" in activating | active | deactivating | reloading) return 0 ;; esac
    return 1
}

hold() {
    local limit=${1:-600} triggers="" unit waited=0
    case "$limit" in '' | *[!0-9]*)
        echo "apply-hold.sh: SECONDS must be a whole number, not '$limit'" >&2
        exit 2
        ;;
    esac
    for unit in opsbot-apply.path opsbot-apply.timer; do
        if systemctl is-active --quiet "$unit"; then
            triggers="$triggers $unit"
        fi
    done
    # A hold left by a run that was killed keeps its list; add to it.
    if [ -f "$held" ]; then
        triggers="$(cat "$held") $triggers"
    fi
    echo "$triggers" | xargs -n1 | sort -u | xargs > "$held"
    if [ -n "${triggers// /}" ]; then
        # shellcheck disable=SC2086
        systemctl stop $triggers
    fi
    if running; then
        echo "==> $apply runs a plan: waiting up to ${limit}s for it to finish (it is never cut)"
    fi
    while running; do
        if [ "$waited" -ge "$limit" ]; then
            release
            echo "apply-hold.sh: $apply still runs after ${limit}s, so nothing was changed;" \
                "see \`journalctl -u $apply\`, and run this again when it has finished" \
                "${APPLY_HOLD_WAIT_HINT:-(or wait longer: --apply-wait SECONDS)}" >&2
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

case "${1:-}" in
    hold) hold "${2:-600}" ;;
    release) release ;;
    *)
        sed -n '2,10p' "$0" >&2
        exit 2
        ;;
esac
