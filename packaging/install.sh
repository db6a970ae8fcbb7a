#!/usr/bin/env bash
# Install opsbot on a host run by systemd, as an operator would:
#   sudo packaging/install.sh [--venv DIR] [--offline | --wheelhouse DIR] [--no-pip] [--enable]
#                             [--without-polkit] [--apply-wait SECONDS]
#   sudo packaging/install.sh --uninstall [--purge] [--venv DIR] [--apply-wait SECONDS]
# - a virtualenv (Debian's python3) with opsbot and its dependencies,
# - units in /etc/systemd/system, users and groups (systemd-sysusers),
#   directories (systemd-tmpfiles --create), /etc/opsbot/opsbot.toml if absent,
# - with --enable: `systemctl enable --now` the sockets and the apply/verify/archive timers and paths.
# - the man page opsbot(8) (generated from the parser) and bash completion for opsbot.
# --offline installs opsbot itself without touching a package index (the venv must
# already hold the dependencies, as in the test container).
# --wheelhouse DIR: a host without a package index: opsbot and every dependency from the
# wheels in DIR, made where there is one by packaging/ansible/build-wheelhouse.sh DIR
# (from the same checkout; copy DIR over, e.g. with scp -r).
# --no-pip: opsbot is already in the venv, e.g. from the Ansible role's wheelhouse: skip
# creating the venv and pip (run as <venv>/share/opsbot/packaging/install.sh --no-pip, the
# copy the wheel installs, it takes the units and files from <venv>/share/opsbot).
# --without-polkit: for hosts without polkit, run the executor and apply as root with an
# empty capability set (drop-ins from units/without-polkit/; state owned by root).
# Run again over an install (an upgrade), it keeps the config, secrets, plans, approvals
# and the audit trail; an apply that runs finishes first (it waits up to --apply-wait
# seconds, 600, and changes nothing past that), and it restarts each daemon whose code
# changed and names it (packaging/apply-hold.sh, python -m shared_io.code_stamp).
# --uninstall [--purge]: packaging/uninstall.sh, see its --help (config and state stay
# unless --purge).
set -euo pipefail

venv=/opt/opsbot/venv
offline=0
no_pip=0
enable=0
without_polkit=0
wheelhouse=""
apply_wait=600
for arg in "$@"; do
    [ "$arg" != --uninstall ] || exec bash "$(dirname "$0")/uninstall.sh" "$@"
done
while [ $# -gt 0 ]; do
    case "$1" in
        --venv) venv=$2; shift 2 ;;
        --offline) offline=1; shift ;;
        --wheelhouse)
            [ $# -ge 2 ] || { echo "install.sh: --wheelhouse needs a DIR" >&2; exit 2; }
            wheelhouse=$2; shift 2 ;;
        --no-pip) no_pip=1; shift ;;
        --enable) enable=1; shift ;;
        --without-polkit) without_polkit=1; shift ;;
        --apply-wait)
            [ $# -ge 2 ] || { echo "install.sh: --apply-wait needs SECONDS" >&2; exit 2; }
            apply_wait=$2; shift 2 ;;
        --purge) echo "install.sh: --purge goes with --uninstall (see --help)" >&2; exit 2 ;;
        -h|--help) sed -n '2,/^set -euo pipefail/{/^set -euo/d;p}' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root" >&2; exit 1; }
if [ -n "$wheelhouse" ]; then
    wheels=("$wheelhouse"/opsbot-*.whl)
    [ -f "${wheels[0]}" ] || {
        echo "install.sh: no opsbot wheel in ${wheelhouse:-(none given)}: make it where there" \
            "is a package index with packaging/ansible/build-wheelhouse.sh DIR" >&2
        exit 2
    }
    [ "${#wheels[@]}" = 1 ] || {
        echo "install.sh: ${#wheels[@]} opsbot wheels in $wheelhouse: build it again" \
            "(build-wheelhouse.sh removes the old one)" >&2
        exit 2
    }
fi
src=$(cd "$(dirname "$0")/.." && pwd)

step() { printf '==> %s\n' "$*"; }
build=""
cleanup() {
    [ -z "$build" ] || rm -rf "$build"
    bash "$src/packaging/apply-hold.sh" release
}
trap cleanup EXIT
# Over an install (an upgrade): no apply starts while the code is replaced, and one that
# runs finishes first (bounded by --apply-wait; past it, exit 1 with nothing changed).
if [ -e /etc/systemd/system/opsbot-apply.service ]; then
    bash "$src/packaging/apply-hold.sh" hold "$apply_wait"
fi

if [ "$no_pip" = 1 ]; then
    [ -x "$venv/bin/opsbot" ] || {
        echo "install.sh: --no-pip, but $venv/bin/opsbot is absent: install opsbot into" \
            "$venv first (or leave out --no-pip)" >&2
        exit 1
    }
    step "opsbot is already in $venv (--no-pip): files from $src"
else
    if [ ! -x "$venv/bin/python" ]; then
        step "creating $venv"
        /usr/bin/python3 -m venv "$venv"
        # packaging/uninstall.sh removes a venv made here, and only opsbot from any other.
        touch "$venv/.made-by-opsbot-install"
    fi
    # pip builds in the source tree; build from a copy so a read-only checkout works.
    build=$(mktemp -d)
    # Caches and a mutation run's copy are not the product (and change while a linter or
    # mutmut runs in the checkout: tar would fail "file changed as we read it").
    tar -C "$src" --exclude=.git --exclude='*.egg-info' --exclude=build \
        --exclude=.mypy_cache --exclude=.ruff_cache --exclude=__pycache__ \
        --exclude=./mutants -cf - . \
        | tar -C "$build" -xf -
    step "installing opsbot into $venv"
    if [ -n "$wheelhouse" ]; then
        # The dependencies from the wheelhouse, then its opsbot wheel over any installed
        # one of the same version (a checkout's version changes seldom).
        "$venv/bin/pip" install --quiet --no-index --find-links "$wheelhouse" "${wheels[0]}"
        "$venv/bin/pip" install --quiet --no-index --no-deps --force-reinstall "${wheels[0]}"
    elif [ "$offline" = 1 ]; then
        "$venv/bin/pip" install --quiet --no-deps --no-index --no-build-isolation "$build"
    else
        "$venv/bin/pip" install --quiet "$build"
    fi
fi
chmod -R a+rX "$venv"

step "installing units, sysusers.d and tmpfiles.d"
install -m 0644 "$src"/units/*.socket "$src"/units/*.service "$src"/units/*.timer \
    "$src"/units/*.path /etc/systemd/system/
install -D -m 0644 "$src/units/sysusers.d/opsbot.conf" /etc/sysusers.d/opsbot.conf
install -D -m 0644 "$src/units/tmpfiles.d/opsbot.conf" /etc/tmpfiles.d/opsbot.conf
if [ "$without_polkit" = 1 ]; then
    step "without polkit: executor and apply run as root with no capabilities"
    for unit in opsbot-executor opsbot-apply; do
        install -D -m 0644 "$src/units/without-polkit/$unit.service.conf" \
            "/etc/systemd/system/$unit.service.d/50-root-no-caps.conf"
    done
    install -m 0644 "$src/units/without-polkit/tmpfiles.conf" /etc/tmpfiles.d/opsbot.conf
    [ -d /var/lib/opsbot ] && chown -R root:root /var/lib/opsbot
fi
# Diagnosis must not reach the code that changes the host, a stored plan, root's approver,
# the console or the relays: hide every package but its own, the schema and shared_io
# from its units at the OS level, at the paths this venv really has (no python3.X in the
# unit files).
step "hiding the executor, plans, the approver, the console and the relays from diagnosis"
hidden=$("$venv/bin/python" -I - <<'PY'
import importlib.util, os, sys
for name in ("plans", "executor_svc", "approver_svc", "opsbot_cli", "notify_svc", "web_svc"):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"install.sh: {name} is not installed in this venv")
    for location in spec.submodule_search_locations:
        print(os.path.realpath(location))
PY
)
for unit in opsbot-diagnose.service opsbot-onfailure@.service opsbot-verify.service; do
    dropin="/etc/systemd/system/$unit.d/50-opsbot-paths.conf"
    install -d -m 0755 "$(dirname "$dropin")"
    {
        echo "# Written by packaging/install.sh: what diagnosis may never reach on this host."
        echo "[Service]"
        for path in $hidden "$venv/bin/opsbot" "$venv/bin/opsbot-executor" "$venv/bin/opsbot-apply" \
            "$venv/bin/opsbot-approver"; do
            echo "InaccessiblePaths=-$path"
        done
    } > "$dropin"
    chmod 0644 "$dropin"
done
systemd-sysusers /etc/sysusers.d/opsbot.conf
# opsbot's users have no home they can write (a user unit there plus logind's linger would
# escape the sandbox); sysusers leaves an existing user as it is, so move an older one's.
# usermod refuses while the user runs a process: the executor is socket-activated.
for user in opsbot-executor opsbot-diagnose; do
    home=$(getent passwd "$user" | cut -d: -f6)
    if [ "$home" != / ]; then
        step "$user: home $home -> /"
        if [ "$user" = opsbot-executor ]; then
            systemctl stop opsbot-executor.service 2>/dev/null || true
        fi
        usermod -d / "$user" || {
            echo "install.sh: $user still runs a process, so its home stays $home;" \
                "stop opsbot-apply.service and opsbot-diagnose.service, then run me again" >&2
            exit 1
        }
    fi
done
systemd-tmpfiles --create /etc/tmpfiles.d/opsbot.conf
if [ ! -e /etc/opsbot/opsbot.toml ]; then
    install -m 0644 "$src/packaging/opsbot.toml.example" /etc/opsbot/opsbot.toml
    step "wrote /etc/opsbot/opsbot.toml from the example: edit [executor.allow]"
fi
ln -sf "$venv/bin/opsbot" /usr/local/bin/opsbot
# The man page from the parser itself (packaging/opsbot-manpage.sh; argparse-manpage is one
# of opsbot's dependencies, so --offline has it too), and the bash completion, into the
# directory the bash-completion package loads from (made here if that package is absent).
man8=/usr/local/share/man/man8
step "installing the man page $man8/opsbot.8 and bash completion for opsbot"
if [ -x "$venv/bin/argparse-manpage" ]; then
    install -d -m 0755 "$man8"
    bash "$src/packaging/opsbot-manpage.sh" "$venv" "$man8/opsbot.8"
    chmod 0644 "$man8/opsbot.8"
    # `man -k opsbot` and whatis read mandb's index: update it as man-db's own trigger
    # does (`mandb /usr/local/share/man`, naming the tree, indexed nothing new).
    if command -v mandb >/dev/null; then
        mandb --quiet >/dev/null 2>&1 || true
    fi
else
    step "no argparse-manpage in $venv, so no man page: install.sh without --offline adds it"
fi
install -D -m 0644 "$src/packaging/opsbot.bash-completion" \
    /usr/share/bash-completion/completions/opsbot
systemctl daemon-reload

if [ "$enable" = 1 ]; then
    step "enabling the sockets, the apply, verify, archive and notify timers and paths"
    systemctl enable --now opsbot-executor.socket opsbot-diagnose.socket opsbot-apply.timer \
        opsbot-apply.path opsbot-verify.timer opsbot-verify.path \
        opsbot-archive.timer opsbot-archive.path opsbot-polkit-rule.timer opsbot-polkit-rule.path \
        opsbot-approver.socket opsbot-web.socket opsbot-notify.path opsbot-notify.timer \
        opsbot-rules.path opsbot-rules.timer
fi
if [ "$without_polkit" = 0 ] && { [ -d /usr/share/polkit-1 ] || [ -x /usr/lib/polkit-1/polkitd ]; }; then
    "$venv/bin/opsbot" polkit-rule --write
else
    step "polkit is not installed: see docs/security.md, 'Without polkit'"
fi
# The IP filters of opsbot-web and opsbot-notify, from [web] and [notify].
"$venv/bin/opsbot" firewall --write >/dev/null
# The code as installed now, each part's sha256 and when it changed, in the venv
# (shared_io/code_stamp.py); then each daemon that started before its code changed is
# restarted and named (an upgrade), so that no old code runs on unnoticed.
"$venv/bin/python" -I -m shared_io.code_stamp record | sed 's/^/==> /'
stale=$("$venv/bin/python" -I -m shared_io.code_stamp stale)
if [ -n "$stale" ]; then
    step "restarting what ran the old code: $(echo "$stale" | xargs)"
    # shellcheck disable=SC2086  # unit names, one a line
    systemctl restart $stale
else
    step "no opsbot daemon runs older code"
fi
"$venv/bin/opsbot" check-config || true
