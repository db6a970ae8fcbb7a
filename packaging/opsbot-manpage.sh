#!/usr/bin/env bash
# Write the man page opsbot(8), generated from opsbot's own argparse parser
# (opsbot_cli.main.build_parser: every command, its options, the exit-status table) by
# the venv's argparse-manpage, so the page never drifts from --help:
#   packaging/opsbot-manpage.sh VENV OUTPUT
# install.sh runs it (into /usr/local/share/man/man8/opsbot.8); so does its unit test.
set -euo pipefail

[ $# = 2 ] || { echo "usage: $0 VENV OUTPUT" >&2; exit 2; }
venv=$1
output=$2
version=$("$venv/bin/python" -I -c 'from importlib.metadata import version; print(version("opsbot"))')
# argparse wraps usage lines at $COLUMNS: the same page whatever terminal runs this.
COLUMNS=80 "$venv/bin/argparse-manpage" --module opsbot_cli.main --function build_parser \
    --prog opsbot --project-name opsbot --version "$version" --manual-section 8 \
    --manual-title "opsbot manual" \
    --description "review, approve and apply fixes for failed systemd services" \
    --output "$output"
