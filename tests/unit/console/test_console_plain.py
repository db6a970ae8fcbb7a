"""``opsbot plans`` and ``opsbot show`` speak to the executor in plain JSON (issue 13,
item 11): they must send the bytes the models send, read a reply as the models read it
(the same defaults, the same refusals), hash a plan to the bytes ``Plan.canonical()``
gives (its sha256 is what an operator approves) and build the argv the executor's tools
build. And they must not import shared_schema's models, pydantic or executor_svc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from opsbot_cli import plain, screen
from opsbot_cli.main import main
from plans import step_argv
from shared_schema import (
    MAX_REPLY_BYTES,
    PLAN_ID_PATTERN,
    PROTOCOL_VERSION,
    WRITE_TOOL_TABLE,
    ListPlans,
    Plan,
    PlanState,
    ShowPlan,
    StepRecord,
    Verification,
    encode_message,
    text,
)
from testbed.canned_executor import (
    AT,
    PLAN_ID,
    canned_executor,
    detail_of,
    listing_of,
    summary_of,
)

REPO = Path(__file__).resolve().parents[3]
INVOCATION = "0123456789abcdef0123456789abcdef"

#: Plans as a diagnosis may propose them: defaults left out or given, explicit nulls,
#: every field of expect, reasons, non-ASCII text, stop_on_error off, eight steps.
RAW_PLANS: list[dict[str, Any]] = [
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]},
    {
        "goal": "bring nginx back",
        "steps": [
            {
                "tool": "reset_failed_unit",
                "args": {"unit": "nginx.service"},
                "expect": {"active_state": ["failed"]},
                "reason": "start limit hit",
            },
            {
                "tool": "restart_unit",
                "args": {"unit": "nginx.service"},
                "expect": {
                    "active_state": ["failed", "inactive"],
                    "sub_state": ["failed", "dead"],
                    "invocation_id": INVOCATION,
                },
                "reason": None,
            },
        ],
        "stop_on_error": False,
    },
    {
        "goal": "Dienst wieder starten: «worker» — ünïcödé ✓",
        "steps": [
            {
                "tool": "start_unit",
                "args": {"unit": "worker@1.service"},
                "expect": {"active_state": None, "sub_state": ["dead"], "invocation_id": ""},
                "reason": "réessayer après l'échec",
            }
        ],
        "stop_on_error": True,
    },
    {
        "goal": "every tool once, and more",
        "steps": [
            {"tool": tool.name, "args": {"unit": f"u{i}.service"}, "expect": None}
            for i, tool in enumerate(WRITE_TOOL_TABLE * 2)
        ][:8],
    },
]
PLANS = [Plan.model_validate(raw) for raw in RAW_PLANS]


def wire(model: Any) -> dict[str, Any]:
    """A reply as the console receives it: the executor's bytes, decoded."""
    return plain.decode_reply(encode_message(model))


def test_the_requests_are_the_bytes_the_models_send() -> None:
    """``list`` and ``show`` encoded by hand are byte for byte what encode_message sends
    for ListPlans and ShowPlan."""
    assert plain.list_request() == encode_message(ListPlans())
    assert plain.show_request(PLAN_ID) == encode_message(ShowPlan(plan_id=PLAN_ID))


@pytest.mark.parametrize("plan", PLANS, ids=[p.goal[:16] for p in PLANS])
def test_a_plan_read_as_plain_json_hashes_to_its_canonical_bytes(plan: Plan) -> None:
    """For every kind of plan the executor can store, the plan in its PLAN reply, read as
    plain JSON, gives exactly ``Plan.canonical()``: the sha256 the operator approves."""
    detail = plain.plan_detail(wire(detail_of(plan)))
    assert isinstance(detail, dict)
    assert plain.canonical_plan(detail["plan"]) == plan.canonical()
    assert plain.step_argv(detail["plan"]) == step_argv(plan)


@pytest.mark.parametrize("raw", RAW_PLANS, ids=[str(i) for i in range(len(RAW_PLANS))])
def test_defaults_and_nulls_are_read_as_the_model_reads_them(raw: dict[str, Any]) -> None:
    """A plan sent with its defaults left out and its empty fields as null (as a
    diagnosis writes it) is normalised as the model normalises it: the same
    ``model_dump`` and the same canonical bytes."""
    reply = json.loads(encode_message(detail_of(Plan.model_validate(raw))))
    reply["plan"] = raw
    detail = plain.plan_detail(reply)
    assert isinstance(detail, dict)
    model = Plan.model_validate(raw)
    assert detail["plan"] == model.model_dump(mode="json")
    assert plain.canonical_plan(detail["plan"]) == model.canonical()


def test_replies_read_as_plain_json_are_what_the_models_dumped() -> None:
    """``--json`` prints what it printed with the models: a PLAN reply with verification,
    step records and history, and a PLANS reply, read by hand, equal their
    ``model_dump(mode="json")``, defaults and nulls included."""
    detail = detail_of(
        PLANS[1],
        PlanState.VERIFIED,
        steps=[
            StepRecord(
                index=1,
                tool="reset_failed_unit",
                argv=step_argv(PLANS[1])[0],
                outcome="ok",
                started_at=AT,
                finished_at=AT,
                exit_status=0,
            ),
            StepRecord(index=2, tool="restart_unit", argv=[], outcome="not-run"),
        ],
        verification=Verification(
            result="verified", evidence=["nginx.service is active"], seconds=5, at=AT, by="x"
        ),
        reason="done",
    )
    assert plain.plan_detail(wire(detail)) == detail.model_dump(mode="json")
    listing = listing_of(summary_of(PLANS[0]), summary_of(PLANS[2], PlanState.STALE))
    assert plain.plan_list(wire(listing)) == listing.model_dump(mode="json")


def test_the_write_tools_and_constants_are_the_schema_s() -> None:
    """What plain.py declares again is what shared_schema and executor_svc declare first:
    the tools' verbs and argv, the protocol version, the reply limit, the plan id
    pattern, the states; screen.printable escapes what shared_schema.text does."""
    assert dict(plain.WRITE_TOOL_VERBS) == {t.name: t.verb for t in WRITE_TOOL_TABLE}
    for tool in WRITE_TOOL_TABLE:
        one = Plan.model_validate(
            {"goal": "g", "steps": [{"tool": tool.name, "args": {"unit": "a.service"}}]}
        )
        assert plain.step_argv(one.model_dump(mode="json")) == step_argv(one)
    assert plain.PROTOCOL_VERSION == PROTOCOL_VERSION
    assert plain.MAX_REPLY_BYTES == MAX_REPLY_BYTES
    assert plain.PLAN_ID_PATTERN == PLAN_ID_PATTERN
    assert [s.value for s in plain.PlanState] == [s.value for s in PlanState]
    assert screen._CONTROL.pattern == text._CONTROL.pattern
    sample = "ok\x1b[31m\n\t\u202eevil\u2066\x7f\x9f é"
    assert screen.printable(sample) == text.printable(sample)


def test_the_pure_modules_load_without_the_package(tmp_path: Path) -> None:
    """In a fresh process, plain.py has shared_schema's states, canonical JSON and time
    spans working, and neither shared_schema nor pydantic was imported."""
    probe = (
        "import json, sys\n"
        "from opsbot_cli import plain\n"
        "assert plain.PlanState('STALE').is_final and plain.parse_timespan('1h 30min') == 5400\n"
        "assert plain.canonical_json({'b': 1, 'a': 'é'}) == '{\"a\":\"é\",\"b\":1}'.encode()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    assert not {m for m in loaded if m.split(".")[0] in ("shared_schema", "pydantic")}


MALFORMED = [
    (b"not json\n", "not valid JSON"),
    (b'{"v":1,"verdict":"PLANS","plans":[],"plans":[]}\n', "duplicate key 'plans'"),
    (b'{"v":1,"verdict":"PLANS","plans":[NaN]}\n', "NaN is not valid JSON"),
    (b"[1]\n", "a reply is a JSON object, not list"),
    (b'{"v":2,"verdict":"PLANS","plans":[]}\n', "unsupported protocol version 2"),
    (b'{"v":true,"verdict":"PLANS","plans":[]}\n', "unsupported protocol version True"),
    (b'{"v":1,"verdict":"PLAN"}\n', "reply.verdict is PLAN, not PLANS"),
    (b'{"v":1,"verdict":"PLANS","plans":{}}\n', "reply.plans is not a list"),
    (b'{"v":1,"verdict":"PLANS","plans":[],"x":1}\n', "reply has an unknown key 'x'"),
    (b'{"v":1,"verdict":"REJECT"}\n', "reply.reason is missing"),
]


@pytest.mark.parametrize(("line", "said"), MALFORMED, ids=[s for _, s in MALFORMED])
def test_a_malformed_reply_is_one_line_of_error(
    line: bytes,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whatever a broken executor sends, ``opsbot plans`` ends with one error line naming
    what is wrong, exit 1, no traceback."""
    sock = tmp_path / "executor.sock"
    monkeypatch.setenv("OPSBOT_SOCKET", str(sock))
    with canned_executor(sock, line):
        assert main(["plans"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("opsbot: error: the executor sent a malformed reply: ")
    assert said in " ".join(err.split())  # one error, wrapped at 100 columns if long
    assert "opsbot: error:" not in err[1:] and "Traceback" not in err


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["plan"].update(extra=1), "reply.plan has an unknown key 'extra'"),
        (lambda d: d["plan"].update(steps=[]), "reply.plan.steps has 0 items"),
        (
            lambda d: d["plan"]["steps"][0].update(tool="rm_rf"),
            "reply.plan.steps[0].tool is unknown: 'rm_rf'",
        ),
        (lambda d: d["plan"].update(stop_on_error=1), "reply.plan.stop_on_error is not true"),
        (lambda d: d["plan"]["steps"][0].update(expect={}), "reply.plan.steps[0].expect expects"),
        (lambda d: d["summary"].update(submitted_at="soon"), "reply.summary.submitted_at is not"),
        (lambda d: d["summary"].update(state="DONE"), "reply.summary.state is unknown: 'DONE'"),
        (lambda d: d["summary"].update(sha256="00"), "reply.summary.sha256 is not a sha256"),
    ],
)
def test_a_plan_reply_of_the_wrong_shape_is_refused(change: Any, said: str) -> None:
    """A PLAN reply the models would refuse is refused, saying where: a key a plan does
    not have, no steps, a tool nobody declared, a bool that is not one, an empty expect,
    a time, a state or a sha256 that is not one."""
    reply = wire(detail_of(PLANS[1]))
    change(reply)
    with pytest.raises(plain.MalformedReply) as refused:
        plain.plan_detail(reply)
    assert refused.value.what.startswith(said)


def loaded_by(argv: list[str], reply: Any, tmp_path: Path) -> set[str]:
    """The modules a fresh ``opsbot ARGV`` imported, answered by a canned executor."""
    probe = (
        "import json, sys\n"
        "from opsbot_cli.main import main\n"
        f"status = main({argv!r})\n"
        "print(json.dumps([status, sorted(sys.modules)]))\n"
    )
    sock = tmp_path / "executor.sock"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPSBOT_SOCKET": str(sock)}
    env["OPSBOT_NO_JOURNAL"] = "1"
    with canned_executor(sock, reply):
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=True,
        )
    status, modules = json.loads(done.stdout.splitlines()[-1])
    assert status == 0, done.stderr
    return set(modules)


def heavy(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m.split(".")[0] in ("shared_schema", "pydantic", "executor_svc")}


def test_plans_and_a_final_plan_s_show_import_no_model_and_no_executor(tmp_path: Path) -> None:
    """Answered by an executor, ``opsbot plans`` and ``opsbot show`` of a final plan
    import neither shared_schema's models nor pydantic nor executor_svc, nor structlog."""
    listing = listing_of(summary_of(PLANS[0]))
    for argv, reply in (
        (["plans"], listing),
        (["plans", "--json", "--state", "proposed", "--since", "1d"], listing),
        (["show", PLAN_ID], detail_of(PLANS[1], PlanState.VERIFIED)),
    ):
        loaded = loaded_by(argv, reply, tmp_path)
        assert heavy(loaded) == set(), argv
        assert "structlog" not in loaded


def test_an_open_plan_s_show_reads_live_state_without_any_model(tmp_path: Path) -> None:
    """``opsbot show`` of a plan that may still run reads live state with the executor's
    own read_unit_state (plans.preconditions and the runner, with structlog), still
    without shared_schema's models or pydantic."""
    loaded = loaded_by(["show", PLAN_ID], detail_of(PLANS[1]), tmp_path)
    assert heavy(loaded) == {"executor_svc", "plans.errors", "plans.preconditions"}
