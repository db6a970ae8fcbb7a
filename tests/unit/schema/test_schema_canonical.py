"""Canonical JSON and fingerprints: one byte string per plan, so the sha256 an operator
approves names exactly one plan, however its JSON was written."""

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from shared_schema import WRITE_TOOLS, Plan, canonical_json, fingerprint, parse_plan, sha256_hex

from .plans import expects, free_text, plans, units

GOLDEN_PLAN: dict[str, Any] = {
    "goal": "Bring nginx back — café cache full",
    "steps": [
        {"tool": "reset_failed_unit", "args": {"unit": "nginx.service"}},
        {
            "tool": "restart_unit",
            "args": {"unit": "nginx.service"},
            "expect": {"active_state": ["failed"], "sub_state": ["failed"]},
            "reason": "start limit hit after a bad reload",
        },
    ],
}
GOLDEN_BYTES = (
    '{"goal":"Bring nginx back — café cache full","steps":['
    '{"args":{"unit":"nginx.service"},"tool":"reset_failed_unit"},'
    '{"args":{"unit":"nginx.service"},"expect":{"active_state":["failed"],"sub_state":["failed"]},'
    '"reason":"start limit hit after a bad reload","tool":"restart_unit"}],'
    '"stop_on_error":true}'
).encode()
GOLDEN_SHA256 = "f590a134ee98951d270f8d9c13d23121345b3db810d915a3bdbd252afd419c07"


def valid(data: dict[str, Any]) -> Plan:
    plan = parse_plan(data)
    assert isinstance(plan, Plan), plan
    return plan


def shuffled(value: Any, rng: random.Random) -> Any:
    """``value`` with every object's keys in a random order (lists keep theirs)."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def test_the_canonical_bytes_of_a_plan_are_pinned() -> None:
    """Golden: sorted keys, no whitespace, UTF-8 as UTF-8 (no \\u escapes), absent
    optional fields left out, the stop_on_error default written out. Changing any of
    this changes every fingerprint ever approved."""
    plan = valid(GOLDEN_PLAN)
    assert plan.canonical() == GOLDEN_BYTES
    assert plan.fingerprint() == sha256_hex(GOLDEN_BYTES) == GOLDEN_SHA256


def test_the_order_of_keys_in_the_input_does_not_matter() -> None:
    """The same plan written with its keys in another order has the same bytes and
    fingerprint."""
    reordered = shuffled(GOLDEN_PLAN, random.Random(7))
    assert json.dumps(reordered) != json.dumps(GOLDEN_PLAN)
    assert valid(reordered).canonical() == GOLDEN_BYTES


def test_stop_on_error_true_by_default_is_the_same_plan_as_explicit_true() -> None:
    """Leaving out stop_on_error and writing ``true`` are one plan (one fingerprint);
    ``false`` is another."""
    default = valid(GOLDEN_PLAN)
    explicit = valid({**GOLDEN_PLAN, "stop_on_error": True})
    keep_going = valid({**GOLDEN_PLAN, "stop_on_error": False})
    assert default.fingerprint() == explicit.fingerprint()
    assert keep_going.fingerprint() != default.fingerprint()


def test_fingerprint_is_the_sha256_of_the_canonical_bytes() -> None:
    """``fingerprint(plan)`` is the lower-case hex sha256 of ``plan.canonical()``."""
    plan = valid(GOLDEN_PLAN)
    assert fingerprint(plan) == plan.fingerprint() == sha256_hex(plan.canonical())
    assert len(fingerprint(plan)) == 64
    assert fingerprint(plan) == fingerprint(plan).lower()


def test_canonical_json_refuses_values_that_print_two_ways() -> None:
    """NaN and infinities have no single JSON form, so canonical_json refuses them."""
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            canonical_json({"x": value})


@settings(max_examples=100, deadline=None)
@given(data=plans, rng=st.randoms(use_true_random=False))
def test_a_valid_plan_keeps_its_fingerprint_whatever_its_key_order(
    data: dict[str, Any], rng: random.Random
) -> None:
    """Any valid plan, with the keys of every object shuffled, has the same canonical
    bytes and fingerprint; and its canonical bytes parse back to the same plan."""
    plan = valid(data)
    again = valid(shuffled(data, rng))
    assert again.canonical() == plan.canonical()
    assert again.fingerprint() == plan.fingerprint()
    assert valid(json.loads(plan.canonical())).canonical() == plan.canonical()


def _mutate(data: dict[str, Any], draw: st.DataObject) -> tuple[str, dict[str, Any]]:
    """``data`` with one thing an operator would care about changed, and what."""
    changed = copy.deepcopy(data)
    steps: list[dict[str, Any]] = changed["steps"]
    kinds = ["goal", "stop_on_error", "tool", "unit", "reason", "expect"]
    if len(steps) < 8:
        kinds.append("add step")
    if len(steps) > 1:
        kinds.append("drop step")
    kind = draw.draw(st.sampled_from(kinds), label="mutation")
    index = draw.draw(st.integers(0, len(steps) - 1), label="step")
    step = steps[index]
    if kind == "goal":
        changed["goal"] = draw.draw(free_text.filter(lambda g: g != data["goal"]))
    elif kind == "stop_on_error":
        changed["stop_on_error"] = not data.get("stop_on_error", True)
    elif kind == "tool":
        step["tool"] = draw.draw(st.sampled_from(WRITE_TOOLS).filter(lambda t: t != step["tool"]))
    elif kind == "unit":
        unit = step["args"]["unit"]
        step["args"] = {"unit": draw.draw(units.filter(lambda u: u != unit))}
    elif kind == "reason":
        if "reason" in step and draw.draw(st.booleans()):
            del step["reason"]
        else:
            step["reason"] = draw.draw(free_text.filter(lambda r: r != step.get("reason")))
    elif kind == "expect":
        if "expect" in step and draw.draw(st.booleans()):
            del step["expect"]
        else:
            step["expect"] = draw.draw(expects.filter(lambda e: e != step.get("expect")))
    elif kind == "add step":
        steps.insert(index, copy.deepcopy(step))
    else:
        del steps[index]
    return kind, changed


@settings(max_examples=150, deadline=None)
@given(data=plans, draw=st.data())
def test_any_change_to_any_field_changes_the_fingerprint(
    data: dict[str, Any], draw: st.DataObject
) -> None:
    """Changing the goal, stop_on_error, a step's tool, unit, reason or expect, or adding
    or removing a step, gives a different fingerprint: an approval can never carry over
    to an edited plan."""
    kind, changed = _mutate(data, draw)
    assert valid(changed).fingerprint() != valid(data).fingerprint(), kind


def test_the_symptom_and_the_plan_followed_are_hashed_with_the_steps() -> None:
    """Golden: a follow-up's symptom and ``follows`` are in the canonical bytes (sorted
    like every key), so an approval of the second attempt names that attempt: another
    symptom, another plan followed or none, each gives another fingerprint; a plan
    without them keeps the bytes it always had."""
    follow_up = {
        **GOLDEN_PLAN,
        "symptom": {"unit": "web.service", "health": ["web"]},
        "follows": "20261129-213500-1a2b3c4d",
    }
    plan = valid(follow_up)
    assert (
        plan.canonical()
        == (
            '{"follows":"20261129-213500-1a2b3c4d",'
            + GOLDEN_BYTES.decode()[1:-1]
            + ',"symptom":{"health":["web"],"unit":"web.service"}}'
        ).encode()
    )
    others = [
        {**follow_up, "symptom": {"unit": "web.service", "health": []}},
        {**follow_up, "symptom": {"unit": "api.service", "health": ["web"]}},
        {**follow_up, "follows": "20261129-213500-1a2b3c4e"},
        {k: v for k, v in follow_up.items() if k != "follows"},
    ]
    prints = {valid(o).fingerprint() for o in others} | {plan.fingerprint()}
    assert len(prints) == len(others) + 1
    assert GOLDEN_SHA256 not in prints and valid(GOLDEN_PLAN).fingerprint() == GOLDEN_SHA256
