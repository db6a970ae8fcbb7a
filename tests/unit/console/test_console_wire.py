"""``opsbot plans`` and ``opsbot show`` read the executor's replies against the models'
generated JSON Schema (opsbot_cli.wire): they must send the bytes the models send, read a
reply as the models read it (the same defaults, never a reply the models refuse), hash a
plan to the bytes ``Plan.canonical()`` gives (its sha256 is what an operator approves)
and build the argv the write tools build. The schema file is the models' own output (a
drifted file fails here), and the commands import neither pydantic, nor a model, nor a
daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic import ValidationError

from opsbot_cli import screen, wire
from opsbot_cli.main import main
from plans import argv_of, step_argv
from shared_schema import (
    WRITE_TOOL_TABLE,
    ListPlans,
    Plan,
    PlanDetail,
    PlanList,
    PlanState,
    ShowPlan,
    StepRecord,
    Verification,
    encode_message,
)
from shared_schema.console_schema import console_schema
from shared_schema.escape import printable
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


def received(model: Any) -> dict[str, Any]:
    """A reply as the console receives it: the executor's bytes, decoded."""
    return wire.decode_reply(encode_message(model))


def test_the_schema_file_is_what_the_models_generate() -> None:
    """opsbot_cli/wire_schema.json is exactly shared_schema.console_schema(): a model the
    console reads that changed without `scripts/generate-wire-schema` fails here."""
    written = json.loads((REPO / "opsbot_cli" / "wire_schema.json").read_text())
    assert written == console_schema(), "run scripts/generate-wire-schema"


def test_a_schema_keyword_the_reader_does_not_know_is_refused() -> None:
    """A constraint kind the reader would not check (``multipleOf``, say) is refused when
    the schema is read, never passed over."""
    with pytest.raises(wire.MalformedReply, match="multipleOf"):
        wire._known_keywords({"properties": {"n": {"type": "integer", "multipleOf": 2}}}, "x")
    wire.schema.cache_clear()
    assert wire.schema()["protocol_version"] == 1  # the real file has none


def test_the_requests_are_the_bytes_the_models_send() -> None:
    """``list`` and ``show`` built from the schema are byte for byte what encode_message
    sends for ListPlans and ShowPlan."""
    assert wire.list_request(200) == encode_message(ListPlans())
    since = datetime(2026, 12, 1, 15, 20, tzinfo=UTC)
    assert wire.list_request(10, since) == encode_message(ListPlans(limit=10, since=since))
    assert wire.show_request(PLAN_ID) == encode_message(ShowPlan(plan_id=PLAN_ID))


@pytest.mark.parametrize("plan", PLANS, ids=[p.goal[:16] for p in PLANS])
def test_a_plan_read_as_plain_json_hashes_to_its_canonical_bytes(plan: Plan) -> None:
    """For every kind of plan the executor can store, the plan in its PLAN reply, read as
    plain JSON, gives exactly ``Plan.canonical()``: the sha256 the operator approves."""
    detail = wire.plan_detail(received(detail_of(plan)))
    assert isinstance(detail, dict)
    assert wire.canonical_plan(detail["plan"]) == plan.canonical()
    assert argv_of(detail["plan"]["steps"]) == step_argv(plan)


@pytest.mark.parametrize("raw", RAW_PLANS, ids=[str(i) for i in range(len(RAW_PLANS))])
def test_defaults_and_nulls_are_read_as_the_model_reads_them(raw: dict[str, Any]) -> None:
    """A plan sent with its defaults left out and its empty fields as null (as a
    diagnosis writes it) is normalised as the model normalises it: the same
    ``model_dump`` and the same canonical bytes."""
    reply = json.loads(encode_message(detail_of(Plan.model_validate(raw))))
    reply["plan"] = raw
    detail = wire.plan_detail(reply)
    assert isinstance(detail, dict)
    model = Plan.model_validate(raw)
    assert detail["plan"] == model.model_dump(mode="json")
    assert wire.canonical_plan(detail["plan"]) == model.canonical()


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
    assert wire.plan_detail(received(detail)) == detail.model_dump(mode="json")
    listing = listing_of(summary_of(PLANS[0]), summary_of(PLANS[2], PlanState.STALE))
    assert wire.plan_list(received(listing)) == listing.model_dump(mode="json")


def test_the_console_escapes_with_the_schema_s_rule() -> None:
    """What the console prints of untrusted text is escaped by the one rule the schema
    refuses text by (shared_schema.escape)."""
    assert screen.printable is printable
    assert screen.printable("ok\x1b[31m\u202eevil") == "ok\\x1b[31m\\u202eevil"


#: What the reader loads to read a reply and the argv and words of a plan: the pure
#: modules of the schema and plans, never a model.
PURE_SCHEMA = {
    "shared_schema",
    "shared_schema.canonical",
    "shared_schema.escape",
    "shared_schema.limits",
    "shared_schema.messages",
    "shared_schema.names",
    "shared_schema.states",
    "shared_schema.timespan",
    "shared_schema.write_tools",
}


def test_the_reader_loads_no_model(tmp_path: Path) -> None:
    """In a fresh process, reading a PLANS reply, building a plan's argv and saying a
    window in words import neither pydantic nor a module of the schema that builds a
    model."""
    listing = json.dumps(received(listing_of(summary_of(PLANS[0]))))
    probe = (
        "import json, sys\n"
        "from opsbot_cli import wire\n"
        "from plans import argv_of, wait_text\n"
        f"assert wire.plan_list(json.loads({listing!r}))['plans']\n"
        "assert argv_of([{'tool': 'start_unit', 'args': {'unit': 'a.service'}}])\n"
        "assert wait_text(None, None, long=False)\n"
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
    assert heavy(set(json.loads(done.stdout))) == set()


MALFORMED = [
    (b"not json\n", "not valid JSON"),
    (b'{"v":1,"verdict":"PLANS","plans":[],"plans":[]}\n', "duplicate key 'plans'"),
    (b'{"v":1,"verdict":"PLANS","plans":[NaN]}\n', "NaN is not valid JSON"),
    (b"[1]\n", "is a JSON object, not list"),
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
        (
            lambda d: d["plan"]["steps"][0].update(expect={}),
            "reply.plan.steps[0].expect needs one of active_state",
        ),
        (lambda d: d["summary"].update(submitted_at="soon"), "reply.summary.submitted_at is not"),
        (lambda d: d["summary"].update(state="DONE"), "reply.summary.state is unknown: 'DONE'"),
        (lambda d: d["summary"].update(sha256="00"), "reply.summary.sha256 is not of the form"),
        (
            lambda d: d["plan"]["steps"][0]["args"].update(unit="-x.service"),
            "reply.plan.steps[0].args.unit is not of the form",
        ),
        (lambda d: d["plan"].update(goal="a\x1b[2Jb"), "reply.plan.goal is not of the form"),
    ],
)
def test_a_plan_reply_of_the_wrong_shape_is_refused(change: Any, said: str) -> None:
    """A PLAN reply the models would refuse is refused, saying where: a key a plan does
    not have, no steps, a tool nobody declared, a bool that is not one, an empty expect,
    a time, a state or a sha256 that is not one."""
    reply = received(detail_of(PLANS[1]))
    change(reply)
    with pytest.raises(wire.MalformedReply) as refused:
        wire.plan_detail(reply)
    assert refused.value.what.startswith(said)
    with pytest.raises(ValidationError):
        PlanDetail.model_validate(reply)  # and the models refuse it too


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
    """Modules that build models, or belong to a daemon."""
    return {
        m
        for m in loaded
        if m.split(".")[0] in ("pydantic", "executor_svc", "approver_svc")
        or (m.split(".")[0] == "shared_schema" and m not in PURE_SCHEMA)
        or m in ("plans.store", "plans.gate", "plans.records")
    }


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
    """``opsbot show`` of a plan that may still run reads live state with the one reader
    (shared_io.unit_show) and says it in plans' words (plans.preconditions), still
    without a model, pydantic or a daemon."""
    loaded = loaded_by(["show", PLAN_ID], detail_of(PLANS[1]), tmp_path)
    assert {"shared_io.unit_show", "plans.preconditions"} <= loaded
    assert heavy(loaded) == set()


# -- the reader never takes what the models refuse ------------------------------------------

#: Values a broken or subverted executor might put anywhere in a reply.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(
        ["", "x", "app.service", "-x.service", "PROPOSED", "DONE", "restart_unit", "rm_rf"]
    )
    | st.sampled_from(["2026-11-29T21:35:00Z", "2026-11-29 21:35", "soon", "0" * 64, PLAN_ID])
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each key of each object and index of each list."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def _mutated(reply: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> Any:
    """``reply`` with the value at ``path`` replaced, removed, or given a new key."""
    copy = json.loads(json.dumps(reply))
    if not path:
        return value if how == "replace" else copy
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "remove":
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last]["unexpected"] = value
    return copy


REPLIES = [
    (PlanDetail, received(detail_of(PLANS[1], PlanState.APPROVED))),
    (PlanDetail, received(detail_of(PLANS[2], PlanState.VERIFIED, reason="done"))),
    (PlanList, received(listing_of(summary_of(PLANS[0]), summary_of(PLANS[3])))),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_what_the_reader_takes_the_models_take(data: st.DataObject) -> None:
    """A reply changed anywhere (a value replaced by any JSON value, a key removed, an
    unknown key added) is taken by the console's reader only if the models take it too:
    a reply the executor's models would refuse never reaches an operator's screen as a
    plan to approve. (The reader may be stricter: a time without its offset, a number
    given as a string.)"""
    model, reply = data.draw(st.sampled_from(REPLIES))
    path = data.draw(st.sampled_from(_paths(reply)))
    how = data.draw(st.sampled_from(["replace", "remove", "add"]))
    changed = _mutated(reply, path, how, data.draw(JSON_VALUES))
    shape = wire.plan_detail if model is PlanDetail else wire.plan_list
    try:
        taken = shape(changed) if isinstance(changed, dict) else None
    except wire.MalformedReply:
        return
    if taken is None or isinstance(taken, str):
        return  # not an object, or read as the REJECT it says it is
    checked = model.model_validate(changed)
    assert taken == checked.model_dump(mode="json")
