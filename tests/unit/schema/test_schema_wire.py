"""The executor socket's wire format: one canonical JSON object per line, version 1,
at most 64 KiB. Golden bytes pin the replies diagnosis reads; anything malformed is a
WireError with a message, never another exception."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from shared_schema import (
    MAX_MESSAGE_BYTES,
    Accept,
    FieldError,
    ListPlans,
    Plan,
    PlanDetail,
    PlanList,
    PlanState,
    PlanSummary,
    Reject,
    Revise,
    ShowPlan,
    StepRecord,
    SubmitPlan,
    WireError,
    decode_json_object,
    encode_message,
    parse_reply,
    parse_request,
)
from shared_schema.messages import MAX_NESTING

from .plans import plan_json

PLAN_ID = "20261129-213500-1a2b3c4d"
SHA = "f590a134ee98951d270f8d9c13d23121345b3db810d915a3bdbd252afd419c07"
AT = datetime(2026, 11, 29, 21, 35, tzinfo=UTC)


def wire_error(line: bytes) -> str:
    with pytest.raises(WireError) as caught:
        decode_json_object(line)
    assert caught.value.message == str(caught.value)
    return caught.value.message


# -- golden replies -----------------------------------------------------------------------


def test_accept_is_pinned_on_the_wire() -> None:
    """Golden ACCEPT: sorted keys, no spaces, one trailing newline."""
    assert encode_message(Accept(plan_id=PLAN_ID, sha256=SHA)) == (
        b'{"duplicate":false,"plan_id":"20261129-213500-1a2b3c4d","sha256":"'
        + SHA.encode()
        + b'","v":1,"verdict":"ACCEPT"}\n'
    )


def test_revise_is_pinned_on_the_wire() -> None:
    """Golden REVISE: the field errors as a list of {path, message}."""
    reply = Revise(
        errors=[FieldError(path="steps.0.args.unit", message="unit name must not start with '-'")]
    )
    assert encode_message(reply) == (
        b'{"errors":[{"message":"unit name must not start with \'-\'",'
        b'"path":"steps.0.args.unit"}],"v":1,"verdict":"REVISE"}\n'
    )


def test_reject_is_pinned_on_the_wire() -> None:
    """Golden REJECT: the reason, UTF-8 as is."""
    assert (
        encode_message(Reject(reason="diagnose (diagnose) may not list — ask an operator"))
        == (
            '{"reason":"diagnose (diagnose) may not list — ask an operator","v":1,'
            '"verdict":"REJECT"}\n'
        ).encode()
    )


def test_a_message_is_always_exactly_one_line() -> None:
    """Text with newlines in a reply is escaped, so every message is one line."""
    encoded = encode_message(Reject(reason="first\nsecond\r\nthird"))
    assert encoded.count(b"\n") == 1
    assert encoded.endswith(b"\n")
    assert parse_reply(encoded) == Reject(reason="first\nsecond\r\nthird")


# -- round trips ----------------------------------------------------------------------------

SUMMARY = PlanSummary(
    plan_id=PLAN_ID,
    state=PlanState.APPLIED,
    sha256=SHA,
    goal="restart nginx",
    units=["nginx.service"],
    submitted_at=AT,
    submitted_by="opsbot-diagnose",
    reason="1 step(s) ran",
)
PLAN = Plan.model_validate(plan_json())
REQUESTS = [
    SubmitPlan(plan=plan_json(), run_id="run-1", symptom="nginx exited with status 1"),
    SubmitPlan(plan={"anything": ["goes", {"here": 1}]}),
    ListPlans(),
    ShowPlan(plan_id=PLAN_ID),
]
REPLIES = [
    Accept(plan_id=PLAN_ID, sha256=SHA),
    Accept(plan_id=PLAN_ID, sha256=SHA, duplicate=True),
    Revise(errors=[FieldError(path="goal", message="Field required")]),
    Reject(reason="bad request"),
    PlanList(plans=[]),
    PlanList(plans=[SUMMARY]),
    PlanDetail(
        summary=SUMMARY,
        plan=PLAN,
        argv=[["systemctl", "restart", "--no-ask-password", "--", "nginx.service"]],
        history=[{"state": "PROPOSED", "at": AT.isoformat(), "by": "opsbot-diagnose"}],
        steps=[
            StepRecord(
                index=1,
                tool="restart_unit",
                argv=["systemctl", "restart", "--no-ask-password", "--", "nginx.service"],
                outcome="ok",
                started_at=AT,
                finished_at=AT,
                exit_status=0,
            )
        ],
    ),
]


@pytest.mark.parametrize("message", REQUESTS, ids=lambda m: type(m).__name__)
def test_each_request_round_trips(message: SubmitPlan | ListPlans | ShowPlan) -> None:
    """encode_message, then decode_json_object and parse_request, give the same request
    back, and re-encoding it gives the same bytes."""
    line = encode_message(message)
    again = parse_request(decode_json_object(line.rstrip(b"\n")))
    assert again == message
    assert encode_message(again) == line


@pytest.mark.parametrize("message", REPLIES, ids=lambda m: type(m).__name__)
def test_each_reply_round_trips(message: Accept | Revise | Reject | PlanDetail | PlanList) -> None:
    """encode_message then parse_reply (with or without the newline) give the same reply,
    and re-encoding it gives the same bytes."""
    line = encode_message(message)
    assert parse_reply(line) == message
    assert parse_reply(line.rstrip(b"\n")) == message
    assert encode_message(parse_reply(line)) == line


# -- version ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2, "1", True, None, [1], 1.0])
def test_a_version_other_than_1_is_refused(version: Any) -> None:
    """Requests and replies with v other than the integer 1 (including true, "1" and 1.0)
    are refused, saying which version this side speaks."""
    with pytest.raises(
        WireError, match=r"unsupported protocol version .*; this executor speaks v=1"
    ):
        parse_request({"v": version, "op": "list"})
    line = json.dumps({"v": version, "verdict": "REJECT", "reason": "x"}).encode()
    with pytest.raises(WireError, match="unsupported protocol version"):
        parse_reply(line)


def test_a_message_without_a_version_is_refused() -> None:
    """No ``v`` at all is an unsupported version (None), not a default."""
    with pytest.raises(WireError, match="unsupported protocol version None"):
        parse_request({"op": "list"})


# -- framing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [b'{"v":1,"op":"list","op":"show"}', b'{"v":1,"op":"submit","plan":{"goal":"a","goal":"b"}}'],
)
def test_duplicate_keys_are_refused_at_any_depth(line: bytes) -> None:
    """Two values for one key could be read two ways; the message names the key."""
    assert wire_error(line) in ("duplicate key 'op'", "duplicate key 'goal'")


def test_invalid_utf8_is_refused_with_its_offset() -> None:
    """Bytes that are not UTF-8 are refused, naming the first bad byte's offset."""
    assert wire_error(b'{"v":1,"op":"\xff"}') == "message is not valid UTF-8 (byte 13)"


@pytest.mark.parametrize("line", [b'{"v":1,"op":"list"}\x00', b'{"v":1,"op":"li\x00st"}'])
def test_a_nul_byte_is_refused(line: bytes) -> None:
    """A NUL byte anywhere in a message is refused."""
    assert wire_error(line) == "message contains a NUL byte"


def _padded(size: int) -> bytes:
    head, tail = b'{"v":1,"op":"list","pad":"', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_a_message_of_exactly_64_kib_is_read() -> None:
    """64 KiB is the largest message; it decodes."""
    assert decode_json_object(_padded(MAX_MESSAGE_BYTES))["op"] == "list"


def test_a_message_larger_than_64_kib_is_refused() -> None:
    """One byte more than 64 KiB is refused before it is parsed."""
    assert wire_error(_padded(MAX_MESSAGE_BYTES + 1)) == "message is larger than 65536 bytes"


def _nested(depth: int, opener: str = "{") -> bytes:
    if opener == "{":
        return ('{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)).encode()
    return ("[" * depth + "]" * depth).encode()


@pytest.mark.parametrize("opener", ["{", "["])
def test_nesting_up_to_32_levels_is_read_and_deeper_is_refused(opener: str) -> None:
    """Objects and arrays may nest 32 levels (the message object counting as one);
    the 33rd is refused."""
    wrapped = b'{"v":1,"x":' + _nested(MAX_NESTING - 1, opener) + b"}"
    assert decode_json_object(wrapped)["v"] == 1
    too_deep = b'{"v":1,"x":' + _nested(MAX_NESTING, opener) + b"}"
    assert wire_error(too_deep) == "message is nested deeper than 32 levels"


def test_very_deep_nesting_is_a_wire_error_not_a_recursion_error() -> None:
    """Tens of thousands of brackets are refused cleanly, never by the parser blowing
    the stack."""
    assert "nested deeper than 32" in wire_error(b"[" * 30000 + b"]" * 30000)


def test_brackets_hidden_in_strings_do_not_hide_deep_nesting() -> None:
    """Closing brackets inside a string cannot offset the real nesting count."""
    line = b'{"pad":"' + b"]" * 200 + b'","x":' + _nested(40) + b"}"
    assert wire_error(line) == "message is nested deeper than 32 levels"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant: str) -> None:
    """JavaScript's NaN and Infinity are not JSON and are refused by name."""
    assert wire_error(f'{{"v":1,"x":{constant}}}'.encode()) == f"{constant} is not valid JSON"


@pytest.mark.parametrize("number", ["1e999", "-1e400"])
def test_a_number_too_large_for_a_float_is_refused(number: str) -> None:
    """A literal like 1e999 would decode to infinity, which canonical JSON cannot print
    back; it is refused like Infinity itself."""
    assert "out of range" in wire_error(f'{{"v":1,"x":{number}}}'.encode())


@pytest.mark.parametrize(
    ("line", "type_name"),
    [(b'[{"v":1,"op":"list"}]', "list"), (b'"list"', "str"), (b"1", "int"), (b"null", "NoneType")],
)
def test_a_message_must_be_an_object(line: bytes, type_name: str) -> None:
    """A top-level array, string, number or null is refused, naming what it was."""
    assert wire_error(line) == f"a message is a JSON object, not {type_name}"


@pytest.mark.parametrize("line", [b"", b"{", b'{"v":1,}', b"{'v': 1}", b"list plans please"])
def test_text_that_is_not_json_is_refused(line: bytes) -> None:
    """Empty input, truncated or Python-style objects and prose are "not valid JSON"."""
    assert wire_error(line).startswith("message is not valid JSON: ")


def test_an_unknown_op_or_a_malformed_envelope_is_a_bad_request() -> None:
    """An op the executor does not know, a plan that is not an object, or a plan id that
    is a path are each a WireError starting "bad request" that says what is wrong."""
    with pytest.raises(WireError, match=r"^bad request: .*'delete'"):
        parse_request({"v": 1, "op": "delete"})
    with pytest.raises(WireError, match=r"^bad request: .*plan: Input should be a valid dict"):
        parse_request({"v": 1, "op": "submit", "plan": ["restart"]})
    with pytest.raises(WireError, match=r"^bad request: .*plan_id: '\.\./x' is not a plan id"):
        parse_request({"v": 1, "op": "show", "plan_id": "../x"})
    with pytest.raises(WireError, match=r"^bad request: .*sneaky: Extra inputs"):
        parse_request({"v": 1, "op": "list", "sneaky": True})


def test_an_unknown_verdict_is_a_bad_reply() -> None:
    """A reply with a verdict diagnosis does not know is a WireError, not a guess."""
    with pytest.raises(WireError, match="^bad reply"):
        parse_reply(b'{"v":1,"verdict":"MAYBE"}')


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)
messages = st.fixed_dictionaries(
    {"v": st.sampled_from([1, 1, 1, 2, "1"])},
    optional={
        "op": st.sampled_from(["submit", "list", "show", "delete"]),
        "plan": json_values,
        "plan_id": st.sampled_from([PLAN_ID, "../x"]) | json_values,
        "run_id": json_values,
        "symptom": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    line=st.binary(max_size=256)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.text(alphabet='{}[]":,0123456789.eE-+ tfnaulrsx\\\x00\xff', max_size=80).map(str.encode)
)
def test_decoding_any_bytes_gives_a_dict_or_a_wire_error(line: bytes) -> None:
    """Whatever bytes arrive, decode_json_object returns a dict or raises WireError:
    never another exception a connection thread would die of."""
    try:
        value = decode_json_object(line)
    except WireError as exc:
        assert exc.message
    else:
        assert isinstance(value, dict)


@settings(max_examples=200, deadline=None)
@given(obj=messages)
def test_parsing_any_object_gives_a_request_or_a_wire_error(obj: dict[str, Any]) -> None:
    """Whatever object decodes, parse_request returns a request or raises WireError."""
    try:
        request = parse_request(obj)
    except WireError as exc:
        assert exc.message
    else:
        assert isinstance(request, SubmitPlan | ListPlans | ShowPlan)
