#!/usr/bin/env bash
# Write the man page opsbot(8), generated from opsbot's own argparse parser
# (opsbot_cli.main.build_parser: every command with its usage, options, verbs, exit
# statuses and examples, as each `opsbot COMMAND --help` prints them) by
# opsbot_cli/manpage.py, which uses the venv's argparse-manpage, so the page never drifts
# from --help:
#   packaging/opsbot-manpage.sh VENV OUTPUT
# install.sh runs it (into /usr/local/share/man/man8/opsbot.8); so does its unit test.
set -euo pipefail

[ $# = 2 ] || { echo "usage: $0 VENV OUTPUT" >&2; exit 2; }
# -P: nothing imported from the directory this runs in.
"$1/bin/python" -P -m opsbot_cli.manpage "$2"
