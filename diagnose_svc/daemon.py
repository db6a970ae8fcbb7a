"""``opsbot-diagnose``: the command line of the diagnosis service.

``opsbot-diagnose run [--symptom TEXT] [--json] UNIT`` diagnoses one unit once (what
``opsbot-onfailure@.service`` runs), submits a plan to the executor if the policy
proposes one, and prints the verdict. ``opsbot-diagnose verify`` checks the applied plans
awaiting verification (what ``opsbot-verify.service`` runs; diagnose_svc/verify.py), and
``opsbot-diagnose baseline`` keeps a snapshot of a healthy host (what it runs next;
diagnose_svc/baseline.py). One
top-level handler maps the service's errors to one line on stderr and an exit status
(``DiagnoseError.exit_status``, sysexits.h) that makes sense to ``Restart=``; tracebacks
only for the unexpected.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from diagnose_svc.actions import TriedPlan
from diagnose_svc.baseline import read_host, take
from diagnose_svc.errors import ExecutorProtocolError, UsageError
from diagnose_svc.events import EventSink
from diagnose_svc.executor_client import DEFAULT_SOCKET_PATH, ExecutorClient
from diagnose_svc.scope import build_scope
from diagnose_svc.tools import READ_TOOLS, ToolContext
from diagnose_svc.tools._baseline_store import Snapshot
from diagnose_svc.unit_names import unit_arg
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from diagnose_svc.verify import Verifier, tried_plan, wants_follow_up
from shared_io import log
from shared_io.activation import activated_socket, bind
from shared_io.config import load_config
from shared_io.errors import OpsbotError
from shared_io.live_config import LiveConfig, reload_on_hup
from shared_schema import DiagnoseSettings, OpsbotConfig
from shared_schema.executor_socket import Pending
from shared_schema.text import printable

EX_OK = 0
EX_UNAVAILABLE = 69
#: Endings that mean something outside diagnosis is broken; the unit should fail.
_FAILED_ENDINGS = {"policy_error": EX_UNAVAILABLE, "executor_error": EX_UNAVAILABLE}


def render(verdict: PlanVerdict | NoteVerdict) -> str:
    """The verdict as an operator reads it in a terminal."""
    lines = [f"diagnosis {verdict.run_id} of {verdict.unit}: {verdict.steps_used} steps"]
    if isinstance(verdict, PlanVerdict):
        lines.append(
            f"plan {verdict.plan_id} proposed (sha256 {verdict.sha256}): {verdict.plan.goal}"
        )
        for index, step in enumerate(verdict.plan.steps, 1):
            lines.append(f"  {index}. {step.tool} {step.args.unit}: {step.reason or ''}".rstrip())
        lines.append(f"review and approve it with: sudo opsbot approve {verdict.plan_id}")
    else:
        lines.append(verdict.text)
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="opsbot-diagnose", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug events")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="diagnose one unit once")
    run.add_argument(
        "unit", type=unit_arg, help="the unit to diagnose, e.g. nginx.service (nginx: a service)"
    )
    run.add_argument("--symptom", default="", help="what was observed, in words")
    run.add_argument("--json", action="store_true", help="print the verdict as JSON")
    run.add_argument("--config", type=Path, default=None, help="opsbot.toml to read")
    run.add_argument("--socket", type=Path, default=DEFAULT_SOCKET_PATH, help="executor socket")
    verify = commands.add_parser(
        "verify",
        help="verify the applied plans: did their service come back? (opsbot-verify.service)",
    )
    verify.add_argument("--config", type=Path, default=None, help="opsbot.toml to read")
    verify.add_argument("--socket", type=Path, default=DEFAULT_SOCKET_PATH, help="executor socket")
    verify.add_argument(
        "--no-follow-up", action="store_true", help="never start a follow-up diagnosis"
    )
    verify.add_argument(
        "--no-baseline",
        action="store_true",
        help="do not take the last-known-good baseline first",
    )
    baseline = commands.add_parser(
        "baseline",
        help="if every unit in scope and every health target is healthy now, keep a "
        "snapshot of the host (the last-known-good baseline a diagnosis compares with; "
        "each verify run takes it too)",
    )
    baseline.add_argument("--config", type=Path, default=None, help="opsbot.toml to read")
    serve = commands.add_parser(
        "serve", help="serve diagnosis requests on /run/opsbot/diagnose.sock (socket-activated)"
    )
    serve.add_argument("--config", type=Path, default=None, help="opsbot.toml to read")
    serve.add_argument("--socket", type=Path, default=DEFAULT_SOCKET_PATH, help="executor socket")
    serve.add_argument(
        "--listen",
        type=Path,
        default=None,
        help="bind this path instead of using the socket systemd passes",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=120.0,
        help="exit after this many idle seconds (0: never)",
    )
    return parser


def diagnose_once(
    unit: str,
    symptom: str,
    settings: DiagnoseSettings,
    socket_path: Path,
    on_event: EventSink | None = None,
    tried: Sequence[TriedPlan] = (),
    journal_scope: frozenset[str] | None = None,
) -> PlanVerdict | NoteVerdict:
    """One diagnosis with the configured policy, which is closed afterwards; its journal
    reads stay within ``journal_scope`` (diagnose_svc/scope.py)."""
    # Imported here: the verify and baseline verbs that diagnose nothing do not load
    # the policies and the loop.
    from diagnose_svc.policies import make_policy
    from diagnose_svc.record import Recording, keep
    from diagnose_svc.runtime import run_diagnosis

    policy = make_policy(settings)
    recording = Recording(unit=unit, symptom=symptom, tried=tuple(tried))
    try:
        verdict = run_diagnosis(
            unit,
            symptom,
            policy,
            READ_TOOLS,
            ExecutorClient(socket_path),
            settings,
            on_event,
            tried=tried,
            context=ToolContext(settings=settings, journal_scope=journal_scope),
            recording=recording,
        )
    finally:
        close = getattr(policy, "close", None)
        if callable(close):
            close()
    keep(recording.document(verdict), settings.record)
    return verdict


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    # Root asked for this one (opsbot-onfailure@ of a watched unit): it is read whatever
    # the scope says, and its journal reads reach the scope besides.
    scope = build_scope(config).units | {args.unit}
    verdict = diagnose_once(
        args.unit, args.symptom, config.diagnose, args.socket, journal_scope=scope
    )
    print(verdict.model_dump_json(indent=2) if args.json else render(verdict))
    return _FAILED_ENDINGS.get(verdict.ended_by, EX_OK)


#: Rounds of one verify run at most (a plan applied while it runs is its next round).
VERIFY_ROUNDS = 5


def _verify(args: argparse.Namespace) -> int:
    """Take the baseline if the host is healthy; then verify the applied plans, round
    after round while more wait. The baseline comes first: opsbot-verify.path's start
    merges into a run already going, so a plan applied while this run is busy must be
    found by a later look of the same run, and the last look is the run's last act."""
    config = load_config(args.config)
    client = ExecutorClient(args.socket)
    if not args.no_baseline:
        print(_take_baseline(config))
    for round_number in range(VERIFY_ROUNDS):
        pending = client.pending()
        if not pending.plans:
            if round_number == 0:
                print("no applied plan waits for verification")
            break
        _verify_plans(args, config, client, pending)
    return EX_OK


def _verify_plans(
    args: argparse.Namespace, config: OpsbotConfig, client: ExecutorClient, pending: Pending
) -> None:
    from diagnose_svc.record import file_outcome

    settings = config.diagnose
    watches = Verifier(settings, READ_TOOLS).watch(pending.plans, pending.settle_seconds)
    for watch in watches:
        try:
            recorded = client.report(watch.report())
        except ExecutorProtocolError as exc:
            if watch.result != "verified":
                raise
            # The executor read the plan's units and does not believe it (one failed or
            # was started again after this run's last look): said as UNRESOLVED, so the
            # plan is not left waiting.
            watch.evidence.insert(0, f"VERIFIED was refused: {exc.message}"[:300])
            watch.result, watch.failing_unit = "unresolved", watch.plan.steps[-1].unit
            recorded = client.report(watch.report())
        seen = "; ".join(watch.evidence[:3])
        print(f"{recorded.plan_id}  {recorded.state:<10} {printable(seen)}")
        file_outcome(recorded.plan_id, recorded.state, settings.record)
        if recorded.state != "UNRESOLVED" or args.no_follow_up:
            continue
        unit = watch.failing_unit or watch.plan.steps[-1].unit
        if not wants_follow_up(settings, unit):
            continue
        tried = tried_plan(watch)
        symptom = f"opsbot plan {watch.plan.plan_id} ran and {unit} did not come back"
        with structlog.contextvars.bound_contextvars(follow_up_of=watch.plan.plan_id):
            scope = build_scope(config).units | {unit}  # a unit of a plan root approved
            verdict = diagnose_once(
                unit, symptom, settings, args.socket, tried=[tried], journal_scope=scope
            )
        print(render(verdict))


def _take_baseline(config: OpsbotConfig) -> str:
    """The baseline verb's work: a snapshot if the host is healthy now, in words."""
    units = sorted(build_scope(config).units)

    def read() -> Snapshot | str:
        return read_host(config.diagnose, units, READ_TOOLS)

    return take(read)


def _baseline(args: argparse.Namespace) -> int:
    """A snapshot of the host if it is healthy now (exit 0 either way: an unhealthy host
    is no error, it is just not a baseline)."""
    print(_take_baseline(load_config(args.config)))
    return EX_OK


#: What the service reads only at start (its connection limits and quotas).
START_ONLY = ("diagnose.runs_per_uid", "diagnose.runs_per_minute_per_uid")


def _serve(args: argparse.Namespace) -> int:
    from diagnose_svc.config_broken import ConfigBroken
    from diagnose_svc.server import DiagnoseServer
    from shared_io.errors import ConfigError

    broken: ConfigError | None = None
    try:
        live = LiveConfig(args.config)
    except ConfigError as exc:  # served, not exited on: the socket must stay up
        structlog.get_logger("opsbot.diagnose").error(
            "config.invalid", error=exc.message, hint=exc.hint
        )
        broken = exc
    if args.listen is not None:
        listener = bind(args.listen, backlog=16)
    else:
        activated = activated_socket()
        if activated is None:
            raise UsageError(
                "no socket: start opsbot-diagnose through opsbot-diagnose.socket, or pass "
                "--listen PATH"
            )
        listener = activated

    def diagnose(unit: str, symptom: str, on_event: EventSink) -> PlanVerdict | NoteVerdict:
        config = live.current()  # the file as it stands: an edit needs no restart
        scope = build_scope(config)  # as the dependencies stand now
        scope.require(unit)
        return diagnose_once(
            unit, symptom, config.diagnose, args.socket, on_event, journal_scope=scope.units
        )

    def diagnose_failed(unit: str, symptom: str, on_event: EventSink) -> PlanVerdict | NoteVerdict:
        """A unit's failure, asked by opsbot-onfailure@ (diagnose_svc.onfailure): as
        ``run`` reads it, whatever the scope says, its journal reads reaching the scope."""
        config = live.current()
        scope = build_scope(config).units | {unit}
        return diagnose_once(
            unit, symptom, config.diagnose, args.socket, on_event, journal_scope=scope
        )

    if broken is not None:
        server: DiagnoseServer = ConfigBroken(listener, broken, args.config, args.idle_timeout)
    else:
        # The server's own limits (connections, quotas) are the ones read at start.
        server = DiagnoseServer(
            listener,
            diagnose,
            args.idle_timeout,
            settings=live.config.diagnose,
            config_state=lambda: live.state(START_ONLY),
            diagnose_failed=diagnose_failed,
        )
        reload_on_hup(live)
    signal.signal(signal.SIGTERM, lambda signum, frame: server.stopping.set())
    try:
        server.serve()
    finally:
        listener.close()
    return EX_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    log.configure("opsbot-diagnose", verbose=args.verbose)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "verify":
            return _verify(args)
        if args.command == "baseline":
            return _baseline(args)
        return _run(args)
    except OpsbotError as exc:
        print(f"opsbot-diagnose: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"opsbot-diagnose: hint: {exc.hint}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
