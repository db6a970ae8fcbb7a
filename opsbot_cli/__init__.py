"""opsbot's operator console: the ``opsbot`` command, one module per command.

    main          the parser, and the one handler that turns errors into a line and a status
    plans, show   what the executor stores (over its socket, as an operator), read with
                  the models' generated JSON Schema (wire.py): no model is built
    approve, reject, archive, apply   root's decisions, made by plans (the gate, approvals)
    watch         OnFailure= drop-ins that start a diagnosis (onfailure.py)
    polkit_rule, check_config, firewall   the host's privilege rules, from the config
    diagnose      ask the diagnosis service (over its socket), steps shown live
    audit         a plan's story from the journal, trusted entries only (story.py)
    approvers     approvers of the phone page: TOTP secrets and QR codes
    clients       the console's side of both sockets
    output, screen   how things are printed: text for people, --json for scripts

The console decides nothing: whether a plan may run is plans.gate's, root's approval is
plans.road (the road root's opsbot-approver takes too); what a diagnosis concludes is
the diagnosis service's. It imports no daemon. Hidden from the diagnose units.
"""

from opsbot_cli.main import COMMANDS, build_parser

__all__ = ["COMMANDS", "build_parser"]
