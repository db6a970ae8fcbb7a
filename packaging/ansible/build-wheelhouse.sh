#!/usr/bin/env bash
# Build, on the Ansible controller, the wheelhouse that hosts without a package index install
# opsbot from (role opsbot.fleet.opsbot, variable opsbot_wheelhouse):
#   packaging/ansible/build-wheelhouse.sh [DIR]
# - `pip wheel` of this checkout and of every dependency, into DIR (default
#   packaging/ansible/wheelhouse in this checkout, which .gitignore leaves out);
# - with /opt/opsbot/venv/bin/pip when the controller has that venv, else `python3 -m pip`
#   (PIP=... to choose another); the controller needs a package index (or a pip cache),
#   the hosts then need none. Build on the same Debian and Python as the hosts (3.11):
#   systemd-python is compiled here, for this platform.
# - the older opsbot wheels in DIR are removed first: the role installs the version the
#   one opsbot wheel there carries.
set -euo pipefail

case "${1:-}" in
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "build-wheelhouse.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "build-wheelhouse.sh: one DIR at most (see --help)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$src/packaging/ansible/wheelhouse}

step() { printf '==> %s\n' "$*"; }
die() { echo "build-wheelhouse.sh: $*" >&2; exit 1; }

[ -f "$src/pyproject.toml" ] || die "$src is not an opsbot checkout (no pyproject.toml)"
if [ -n "${PIP:-}" ]; then
    read -r -a pip <<<"$PIP"
elif [ -x /opt/opsbot/venv/bin/pip ]; then
    pip=(/opt/opsbot/venv/bin/pip)
elif command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
    pip=(python3 -m pip)
else
    die "no pip: install python3-pip (or give PIP=/path/to/pip)"
fi
step "pip: ${pip[*]} ($("${pip[@]}" --version | cut -d' ' -f1-2))"

mkdir -p "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd)
# pip builds in the source tree: build from a copy, so a read-only checkout works and
# neither build/ nor the wheelhouse itself ends up in the wheel.
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
tar -C "$src" --exclude=.git --exclude='*.egg-info' --exclude=build \
    --exclude=./packaging/ansible/wheelhouse -cf - . | tar -C "$build" -xf -
rm -f "$dir"/opsbot-*.whl
step "building opsbot and its dependencies into $dir"
"${pip[@]}" wheel --quiet --wheel-dir "$dir" "$build" \
    || die "pip wheel failed (above): a dependency could not be downloaded or built"
wheels=("$dir"/opsbot-*.whl)
[ -f "${wheels[0]}" ] || die "pip wheel wrote no opsbot wheel into $dir"
count=$(find "$dir" -maxdepth 1 -name '*.whl' | wc -l)
step "$count wheels in $dir; opsbot: $(basename "${wheels[0]}")"
step "give the role: opsbot_wheelhouse: $dir"
