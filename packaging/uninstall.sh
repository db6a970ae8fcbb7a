#!/usr/bin/env bash
# Remove opsbot as packaging/install.sh installed it (run as `packaging/install.sh --uninstall`):
#   sudo packaging/install.sh --uninstall [--purge] [--venv DIR] [--apply-wait SECONDS]
# --uninstall waits for an apply that runs to finish (up to --apply-wait seconds, 600; it is
# never cut: past that, nothing is changed), then stops and disables every opsbot unit and
# removes the units, their drop-ins (and those of `opsbot watch`), the polkit rule, the man
# page, the bash completion, /usr/local/bin/opsbot, sysusers.d and tmpfiles.d, and the code:
# the venv if install.sh made it, else opsbot from it. It keeps the config (/etc/opsbot, its
# secrets too) and the state (/var/lib/opsbot*: plans, approvals, the audit chain), so that
# install.sh takes them up again.
# --purge also removes the config, the state and the users and groups opsbot made.
# The journal keeps what opsbot logged (the audit trail too): it is the host's, not opsbot's.
# Run it again to finish one that stopped; it says what it left.
set -euo pipefail

venv=/opt/opsbot/venv
purge=0
apply_wait=600
while [ $# -gt 0 ]; do
    case "$1" in
        --uninstall) shift ;;
        --purge) purge=1; shift ;;
        --venv)
            [ $# -ge 2 ] || { echo "install.sh --uninstall: --venv needs a DIR" >&2; exit 2; }
            venv=$2; shift 2 ;;
        --apply-wait)
            [ $# -ge 2 ] || {
                echo "install.sh --uninstall: --apply-wait needs SECONDS" >&2
                exit 2
            }
            apply_wait=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo pipefail/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) echo "install.sh --uninstall: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh --uninstall: run as root" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
unit_dir=/etc/systemd/system
step() { printf '==> %s\n' "$*"; }

# 1. No apply is cut: its triggers stop, one that runs finishes (bounded; else exit 1).
bash "$here/apply-hold.sh" hold "$apply_wait"
rm -f /run/opsbot-apply-held  # the triggers go below; nothing to start again

# 2. Every opsbot unit stopped (triggers and sockets first, so nothing starts a service
# again), disabled, its files and drop-ins removed.
loaded=$(systemctl list-units --all --plain --no-legend --full 'opsbot*' | awk '{print $1}')
triggers=$(printf '%s\n' $loaded | grep -E '\.(socket|timer|path)$' || true)
services=$(printf '%s\n' $loaded | grep -E '\.service$' || true)
if [ -n "$loaded" ]; then
    step "stopping $(echo $loaded | wc -w) opsbot units"
    # shellcheck disable=SC2086  # unit names, one a word
    [ -z "$triggers" ] || systemctl stop $triggers
    # shellcheck disable=SC2086
    [ -z "$services" ] || systemctl stop $services
fi
# (list-unit-files exits 1 when no file matches: a second run.)
enabled=$({ systemctl list-unit-files --no-legend --full 'opsbot*' || true; } \
    | awk '$2 ~ /^(enabled|enabled-runtime|linked|linked-runtime|alias)$/ {print $1}')
if [ -n "$enabled" ]; then
    step "disabling $(echo $enabled | xargs)"
    # shellcheck disable=SC2086
    systemctl disable --quiet $enabled
fi
watched=$(find "$unit_dir" -mindepth 2 -maxdepth 2 -name 50-opsbot-watch.conf -print)
for dropin in $watched; do
    step "removing $dropin (\`opsbot watch\`)"
    rm -f "$dropin"
    rmdir --ignore-fail-on-non-empty "$(dirname "$dropin")"
done
step "removing opsbot's units and drop-ins from $unit_dir"
rm -f "$unit_dir"/opsbot*.service "$unit_dir"/opsbot*.socket "$unit_dir"/opsbot*.timer \
    "$unit_dir"/opsbot*.path
rm -rf "$unit_dir"/opsbot*.d
rm -f /etc/sysusers.d/opsbot.conf /etc/tmpfiles.d/opsbot.conf
systemctl daemon-reload
systemctl reset-failed 'opsbot*' 2>/dev/null || true
rm -rf /run/opsbot

# 3. What the units and the console left around the host.
step "removing the polkit rules, the man page, the bash completion and /usr/local/bin/opsbot"
# 60-opsbot.rules, and the grants of `opsbot approve --now` (59-opsbot-now-*.rules).
rm -f /etc/polkit-1/rules.d/60-opsbot.rules /etc/polkit-1/rules.d/59-opsbot-now-*.rules \
    /usr/local/share/man/man8/opsbot.8 \
    /usr/share/bash-completion/completions/opsbot
if [ -L /usr/local/bin/opsbot ]; then
    rm -f /usr/local/bin/opsbot
fi
if command -v mandb >/dev/null; then
    mandb --quiet >/dev/null 2>&1 || true
fi

# 4. The code: the venv install.sh made, or opsbot out of one it was given.
if [ -f "$venv/.made-by-opsbot-install" ]; then
    step "removing $venv (install.sh made it)"
    rm -rf "$venv"
    rmdir --ignore-fail-on-non-empty "$(dirname "$venv")" 2>/dev/null || true
elif [ -x "$venv/bin/python" ]; then
    if "$venv/bin/python" -I -m pip show --quiet opsbot >/dev/null 2>&1; then
        step "removing opsbot from $venv (not made by install.sh: the rest stays)"
        "$venv/bin/python" -I -m pip uninstall --quiet --yes opsbot
    fi
    rm -f "$venv/opsbot-code.json"
fi

# 5. --purge: the config, its secrets, the state, the users and groups.
if [ "$purge" = 1 ]; then
    step "purging the config (/etc/opsbot) and the state (/var/lib/opsbot*)"
    rm -rf /etc/opsbot /var/lib/opsbot /var/lib/opsbot-* /var/lib/private/opsbot-*
    for user in opsbot-executor opsbot-diagnose opsbot-web opsbot-notify; do
        if getent passwd "$user" >/dev/null; then
            step "removing user $user"
            userdel "$user"
        fi
    done
    for group in opsbot-executor opsbot-diagnose opsbot-web opsbot-notify opsbot-relay \
        opsbot-operators; do
        if getent group "$group" >/dev/null; then
            step "removing group $group"
            groupdel "$group"
        fi
    done
fi

# 6. Nothing of opsbot runs or listens.
left=$(systemctl list-units --all --plain --no-legend --full 'opsbot*' \
    | awk '$3 != "inactive" {print $1}')
if [ -n "$left" ]; then
    echo "install.sh --uninstall: these opsbot units still run: $(echo $left | xargs);" \
        "stop them (systemctl stop UNIT) and run this again" >&2
    exit 1
fi
if [ "$purge" = 1 ]; then
    step "opsbot is purged: nothing of it runs; the journal keeps what it logged"
else
    step "opsbot is uninstalled: nothing of it runs; kept /etc/opsbot and /var/lib/opsbot*" \
        "(packaging/install.sh takes them up again; --uninstall --purge removes them)"
fi
for yours in /etc/sudoers.d/opsbot-approvers /etc/sudoers.d/opsbot; do
    if [ -e "$yours" ]; then
        step "left $yours: you wrote it (remove it with rm, or edit it with visudo -f)"
    fi
done
