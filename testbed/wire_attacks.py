"""What an attacker sends to opsbot's sockets: crafted messages and hypothesis strategies
that generate more of the same kind. Shared by the property tests in
test_attack_protocol.py and test_attack_diagnose_protocol.py and by
fuzz/fuzz_executor_socket.py (as its seed corpus).

Every message here is either malformed, or well-formed around a plan that must not be
stored; a few are valid on purpose (so that the generators also cross the line) and the
tests accept ACCEPT only for a plan the policy allows.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from shared_schema import MAX_MESSAGE_BYTES, canonical_json

VALID_PLAN: dict[str, Any] = {
    "goal": "restart demo-web after a crash",
    "steps": [
        {
            "tool": "restart_unit",
            "args": {"unit": "demo-web.service"},
            "expect": {"active_state": ["failed"], "sub_state": ["failed"]},
            "reason": "killed by SIGKILL",
        }
    ],
    "stop_on_error": True,
}
VALID_SUBMIT: dict[str, Any] = {"v": 1, "op": "submit", "plan": VALID_PLAN, "run_id": "r-1"}


def line(value: Any) -> bytes:
    try:
        return canonical_json(value) + b"\n"
    except TypeError:  # a mutation put an int key in a dict: JSON makes it a string
        return json.dumps(value, ensure_ascii=False).encode() + b"\n"


def _deep(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def _deep_objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# Units a plan must never be able to name, each for its own reason.
HOSTILE_UNITS = [
    "sshd.service",
    "ssh.service",
    "polkit.service",
    "dbus.service",
    "systemd-journald.service",
    "opsbot-apply.service",
    "opsbot-executor.socket",
    "init.scope",
    "-.slice",
    "-.mount",
    "user.slice",
    "demo-other.service",
    "demo-web.service/../sshd.service",
    "../../../etc/passwd",
    "/etc/systemd/system/demo-web.service",
    "demo-web.service\n",
    "demo-web.service\x00",
    " demo-web.service",
    "demo-web.service ",
    "DEMO-WEB.SERVICE",
    "demo-web",
    "demo-web.socket",
    "--force",
    "-H root@evil demo-web.service",
    "demo-web.service;reboot",
    "$(reboot).service",
    "a" * 300 + ".service",
    "demo\u2010web.service",
    "demo-web.service\u202e",
    "",
]

HOSTILE_TOOLS = [
    "exec",
    "shell",
    "run_command",
    "restart_unit ",
    "RESTART_UNIT",
    "daemon_reload",
    "mask_unit",
    "kill_unit",
    "approve",
    "",
    "restart_unit\x00",
]

# Valid requests in odd framing: each must be served (CRLF, no final newline, several
# in one write, blank lines around them).
VALID_FRAMINGS: list[bytes] = [
    line(VALID_SUBMIT).replace(b"\n", b"\r\n"),
    line({"v": 1, "op": "list"}) * 3,
    line(VALID_SUBMIT).rstrip(b"\n"),
    b"\n\n" + line({"v": 1, "op": "list"}) + b"\n  \n",
]
# Nothing to answer: the daemon reads to the end and closes.
EMPTY: list[bytes] = [b"", b"\n", b"   \r\n"]
# Each of these must get REJECT or REVISE, and store nothing.
MALFORMED: list[bytes] = [
    # framing: truncated, a byte-order mark
    line(VALID_SUBMIT)[:-30],
    line(VALID_SUBMIT)[:1],
    b"\xef\xbb\xbf" + line({"v": 1, "op": "list"}),
    # size: just over the limit, with and without a newline
    b'{"v":1,"op":"list","pad":"' + b"x" * MAX_MESSAGE_BYTES + b'"}\n',
    b"x" * (MAX_MESSAGE_BYTES + 1),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "goal": "g" * 60000}}),
    # wrong types everywhere
    b"[]\n",
    b"null\n",
    b'"submit"\n',
    b"1\n",
    line({"v": "1", "op": "list"}),
    line({"v": True, "op": "list"}),
    line({"v": 2, "op": "list"}),
    line({"op": "list"}),
    line({"v": 1, "op": "submit", "plan": []}),
    line({"v": 1, "op": "submit", "plan": "restart sshd"}),
    line({"v": 1, "op": "submit", "plan": None}),
    line({"v": 1, "op": "submit"}),
    line({"v": 1, "op": "submit", "plan": {}}),
    line({"v": 1, "op": "show", "plan_id": "../../etc/shadow"}),
    line({"v": 1, "op": "show", "plan_id": "20261129-213500-1a2b3c4d/../x"}),
    line({"v": 1, "op": "show", "plan_id": 20261129}),
    line({"v": 1, "op": "list", "extra": 1}),
    # unknown ops
    line({"v": 1, "op": "approve", "plan_id": "20261129-213500-1a2b3c4d"}),
    line({"v": 1, "op": "apply"}),
    line({"v": 1, "op": "exec", "argv": ["systemctl", "restart", "sshd"]}),
    line({"v": 1, "op": ["submit"]}),
    line({"v": 1, "op": None}),
    # deep nesting, in the envelope and in the plan
    _deep(10_000).encode() + b"\n",
    _deep_objects(5_000).encode() + b"\n",
    ('{"v":1,"op":"submit","plan":{"goal":' + _deep(40) + "}}\n").encode(),
    ('{"v":1,"op":"submit","plan":{"goal":"x","steps":' + _deep(33, "{}") + "}}\n").encode(),
    # invalid UTF-8, overlong encodings, encoded surrogates, NUL
    b'{"v":1,"op":"list","x":"\xff"}\n',
    b'{"v":1,"op":"list","x":"\xc0\x80"}\n',
    b'{"v":1,"op":"list","x":"\xed\xa0\x80"}\n',
    b'{"v":1,"op":"li\x00st"}\n',
    b'{"v":1,"op":"list"}\x00\n',
    b'{"v":1,"op":"submit","plan":{"goal":"a\\u0000b","steps":[]}}\n',
    b'{"v":1,"op":"\\ud800"}\n',
    b'{"v":1,"op":"submit","plan":{"goal":"\\udc00","steps":[]}}\n',
    b'{"v":1,"op":"submit","plan":{"\\ud800":1}}\n',
    # huge numbers and non-JSON constants
    b'{"v":1e999,"op":"list"}\n',
    b'{"v":-1e999,"op":"list"}\n',
    b'{"v":NaN,"op":"list"}\n',
    b'{"v":Infinity,"op":"list"}\n',
    b'{"v":' + b"9" * 5000 + b',"op":"list"}\n',
    b'{"v":' + b"9" * 4000 + b',"op":"list"}\n',
    b'{"v":1,"op":"submit","plan":{"goal":"x","steps":[],"stop_on_error":' + b"1" * 4000 + b"}}\n",
    # duplicate keys: the second "plan" or "unit" must not win unseen
    b'{"v":1,"op":"list","op":"submit"}\n',
    b'{"v":1,"op":"submit","plan":'
    + canonical_json(VALID_PLAN)
    + b',"plan":{"goal":"x","steps":[{"tool":"restart_unit","args":{"unit":"sshd.service"}}]}}\n',
    b'{"v":1,"op":"submit","plan":{"goal":"x","steps":[{"tool":"restart_unit",'
    b'"args":{"unit":"demo-web.service","unit":"sshd.service"}}]}}\n',
    # valid envelope, invalid plan
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "steps": []}}),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "steps": VALID_PLAN["steps"] * 9}}),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "goal": "\x1b[2J\x1b[31mall fine"}}),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "goal": "two\nlines"}}),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "stop_on_error": "false"}}),
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, "argv": ["rm", "-rf", "/"]}}),
    line({**VALID_SUBMIT, "run_id": "../x"}),
    line({**VALID_SUBMIT, "symptom": "s" * 501}),
    # a plan with thousands of errors: the answer must still be one bounded line
    line({**VALID_SUBMIT, "plan": {**VALID_PLAN, **{f"{i:x}": 1 for i in range(6000)}}}),
    line(
        {
            **VALID_SUBMIT,
            "plan": {
                "goal": "x",
                "steps": [{"tool": "t" * 60000, "args": {"unit": "demo-web.service"}}],
            },
        }
    ),
]
for _unit in HOSTILE_UNITS:
    _bad = copy.deepcopy(VALID_PLAN)
    _bad["steps"][0]["args"]["unit"] = _unit
    MALFORMED.append(line({**VALID_SUBMIT, "plan": _bad}))
for _tool in HOSTILE_TOOLS:
    _bad = copy.deepcopy(VALID_PLAN)
    _bad["steps"][0]["tool"] = _tool
    MALFORMED.append(line({**VALID_SUBMIT, "plan": _bad}))
for _tool in ("stop_unit", "reload_unit", "reset_failed_unit"):
    _bad = copy.deepcopy(VALID_PLAN)  # tools in the table that the policy does not allow
    _bad["steps"][0]["tool"] = _tool
    _bad["steps"][0]["args"]["unit"] = "demo-db.service"
    MALFORMED.append(line({**VALID_SUBMIT, "plan": _bad}))

SEEDS: list[bytes] = EMPTY + VALID_FRAMINGS + MALFORMED


# -- strategies ----------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(HOSTILE_UNITS + HOSTILE_TOOLS)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
# Paths into a plan an attacker would aim at.
_PLAN_PATHS: list[tuple[Any, ...]] = [
    ("goal",),
    ("steps",),
    ("stop_on_error",),
    ("steps", 0),
    ("steps", 0, "tool"),
    ("steps", 0, "args"),
    ("steps", 0, "args", "unit"),
    ("steps", 0, "expect"),
    ("steps", 0, "expect", "active_state"),
    ("steps", 0, "expect", "sub_state"),
    ("steps", 0, "expect", "invocation_id"),
    ("steps", 0, "reason"),
]


def _set(target: Any, path: tuple[Any, ...], value: Any, delete: bool) -> None:
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value


@st.composite
def mutated_plans(draw: st.DrawFn) -> dict[str, Any]:
    """A valid plan with one to three parts replaced, removed or added."""
    result = copy.deepcopy(VALID_PLAN)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_PLAN_PATHS))
        try:
            kind = draw(st.sampled_from(["value", "delete", "extra", "hostile"]))
            if kind == "delete":
                _set(result, path, None, delete=True)
            elif kind == "extra":
                _set(result, (*path[:-1], draw(st.text(min_size=1, max_size=12))), 1, False)
            elif kind == "hostile":
                _set(result, path, draw(st.sampled_from(HOSTILE_UNITS + HOSTILE_TOOLS)), False)
            else:
                _set(result, path, draw(json_values), False)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed what this one aimed at
    steps = result.get("steps")
    if isinstance(steps, list) and draw(st.booleans()):
        result["steps"] = steps * draw(st.integers(0, 10))  # 0 or more than 8 steps
    return result


envelopes = st.fixed_dictionaries(
    {},
    optional={
        "v": st.sampled_from([1, 0, 2, "1", True, 1.0, None, -1]) | json_values,
        "op": st.sampled_from(["submit", "list", "show", "approve", "apply", "", "SUBMIT"])
        | json_values,
        "plan": mutated_plans() | json_values,
        "plan_id": st.sampled_from(["20261129-213500-1a2b3c4d", "../x", "a/b", ""]) | json_values,
        "run_id": st.text(max_size=70) | json_values,
        "symptom": st.text(max_size=20) | json_values,
    },
)


@st.composite
def byte_mutations(draw: st.DrawFn) -> bytes:
    """A well-formed message, then cut, spliced, or given a poisoned byte."""
    base = draw(
        st.sampled_from([line(VALID_SUBMIT), line({"v": 1, "op": "list"})]) | envelopes.map(line)
    )
    kind = draw(st.sampled_from(["truncate", "insert", "replace", "splice", "repeat"]))
    at = draw(st.integers(0, max(0, len(base) - 1)))
    poison = draw(
        st.sampled_from(
            [
                b"\x00",
                b"\xff",
                b"\xc0\x80",
                b"\xed\xa0\x80",
                b"\n",
                b"\\",
                b'"',
                b"{",
                b"]",
                b"\\ud800",
                b"\x1b[2J",
                b"1e999",
                b"NaN",
                b"\r",
            ]
        )
        | st.binary(min_size=1, max_size=8)
    )
    if kind == "truncate":
        return base[:at]
    if kind == "insert":
        return base[:at] + poison + base[at:]
    if kind == "replace":
        return base[:at] + poison + base[at + len(poison) :]
    if kind == "splice":
        other = draw(st.sampled_from(SEEDS))
        return base[:at] + other[draw(st.integers(0, max(0, len(other) - 1))) :]
    return base * draw(st.integers(2, 5))


messages = (
    envelopes.map(line)
    | st.builds(lambda p: line({"v": 1, "op": "submit", "plan": p}), mutated_plans())
    | byte_mutations()
    | st.binary(max_size=300)
    | st.sampled_from(SEEDS)
    | json_values.map(lambda v: json.dumps(v).encode() + b"\n")
)


# -- the diagnose socket -------------------------------------------------------------------

VALID_DIAGNOSE: dict[str, Any] = {
    "v": 1,
    "op": "diagnose",
    "unit": "demo-web.service",
    "symptom": "returns 502",
}
# Each of these must get exactly one diagnose.error line and start no diagnosis. The
# executor's framing attacks apply as they are (one line, bounded, strict JSON); then
# requests that are JSON but not a diagnosis request of a unit that may be named.
DIAGNOSE_MALFORMED: list[bytes] = MALFORMED + [
    line({**VALID_DIAGNOSE, "v": 2}),
    line({**VALID_DIAGNOSE, "v": 1.0}),
    line({**VALID_DIAGNOSE, "v": True}),
    line({**VALID_DIAGNOSE, "op": "submit"}),
    line({**VALID_DIAGNOSE, "op": "restart"}),
    line({**VALID_DIAGNOSE, "symptom": "s" * 501}),
    line({**VALID_DIAGNOSE, "symptom": ["a"]}),
    line({**VALID_DIAGNOSE, "extra": True}),
    line({"v": 1, "op": "diagnose"}),
    b'{"v":1,"op":"diagnose","unit":"demo-web.service","unit":"sshd.service"}\n',
]
DIAGNOSE_MALFORMED += [
    line({**VALID_DIAGNOSE, "unit": unit})
    for unit in HOSTILE_UNITS
    if unit
    not in (
        "sshd.service",
        "ssh.service",
        "polkit.service",
        "dbus.service",
        "systemd-journald.service",
        "opsbot-apply.service",
        "opsbot-executor.socket",
        "init.scope",
        "user.slice",
        "demo-other.service",
        "demo-web.socket",
    )
]
diagnose_requests = st.fixed_dictionaries(
    {},
    optional={
        "v": st.sampled_from([1, 0, 2, "1", True, 1.0, None]) | json_values,
        "op": st.sampled_from(["diagnose", "submit", "list", "", "DIAGNOSE"]) | json_values,
        "unit": st.sampled_from(["demo-web.service", "nginx", *HOSTILE_UNITS]) | json_values,
        "symptom": st.text(max_size=600) | json_values,
    },
)
diagnose_messages = (
    diagnose_requests.map(line)
    | st.builds(lambda m: m.replace(b'"op":"list"', b'"op":"diagnose"'), byte_mutations())
    | st.binary(max_size=300)
    | st.sampled_from(DIAGNOSE_MALFORMED)
)
