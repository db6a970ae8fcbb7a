"""A plan as the model proposes it: exactly goal, steps and stop_on_error, each step a
known write tool with its own validated arguments. Whatever is wrong comes back as a
list of FieldErrors with dotted paths the model can act on, never as an exception."""

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from shared_schema import WRITE_TOOLS, FieldError, Plan, parse_plan
from shared_schema.text import printable

from .plans import plan_json, restart_step


def errors_of(data: Any) -> list[FieldError]:
    result = parse_plan(data)
    assert isinstance(result, list), f"expected field errors, got a plan: {result!r}"
    assert result, "an invalid plan must come with at least one error"
    return result


def only_error(data: Any) -> FieldError:
    errors = errors_of(data)
    assert len(errors) == 1, errors
    return errors[0]


def test_a_well_formed_plan_is_accepted() -> None:
    """A goal and one restart step is a plan; stop_on_error defaults to true."""
    plan = parse_plan(plan_json())
    assert isinstance(plan, Plan)
    assert plan.goal == "bring nginx back after its config reload failed"
    assert [step.tool for step in plan.steps] == ["restart_unit"]
    assert plan.steps[0].args.unit == "nginx.service"
    assert plan.stop_on_error is True


@pytest.mark.parametrize("key", ["approved", "shell", "priority", "Goal"])
def test_any_other_top_level_key_is_an_error_naming_it(key: str) -> None:
    """A plan that smuggles in a key the schema does not know is refused, and the error
    names that key, so the model can drop it."""
    error = only_error({**plan_json(), key: True})
    assert error.path == key
    assert error.message == "Extra inputs are not permitted"


@pytest.mark.parametrize("missing", ["goal", "steps"])
def test_a_missing_goal_or_steps_is_named(missing: str) -> None:
    """Leaving out a required key yields an error at that key."""
    plan = plan_json()
    del plan[missing]
    assert only_error(plan) == FieldError(path=missing, message="Field required")


@pytest.mark.parametrize(
    ("goal", "says"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("x" * 201, "at most 200 characters"),
        ("nginx \x1b[31mFIXED\x1b[0m", "control character U+001B at offset 6"),
        ("restart nginx\nthen approve everything", "control character U+000A"),
        ("tab\tseparated", "control character U+0009"),
        ("delete\x7f", "control character U+007F"),
        ("c1 control \x9b31m", "control character U+009B"),
        ("nul\x00byte", "control character U+0000"),
        (42, "valid string"),
    ],
)
def test_a_goal_must_be_short_printable_text(goal: Any, says: str) -> None:
    """The goal is shown to the operator in a terminal: it must be non-empty, at most
    200 characters, and carry no newlines, tabs or escape sequences."""
    error = only_error(plan_json(goal=goal))
    assert error.path == "goal"
    assert says in error.message


BIDI = [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E]
BIDI += [0x2066, 0x2067, 0x2068, 0x2069, 0x2028, 0x2029]


@pytest.mark.parametrize("code", BIDI, ids=[f"U+{c:04X}" for c in BIDI])
def test_a_reason_that_would_display_in_another_order_is_refused(code: int) -> None:
    """A bidirectional override, embedding, isolate or mark (or a line separator) makes
    a reason display differently from what it holds: "restart \u202eecivres.bd" reads as
    another unit. The schema refuses each, like any control character."""
    step = restart_step()
    step["reason"] = f"restart {chr(code)}ecivres.bd-omed"
    error = only_error(plan_json(steps=[step]))
    assert error.path == "steps.0.reason"
    assert f"control character U+{code:04X} at offset 8" in error.message


@pytest.mark.parametrize("code", BIDI, ids=[f"U+{c:04X}" for c in BIDI])
def test_printable_shows_bidi_characters_as_escapes(code: int) -> None:
    """What operators read of untrusted text (journal lines, forged fields) shows each
    such character as a visible escape, and leaves right-to-left letters alone."""
    shown = printable(f"a{chr(code)}b שלום \x1b")
    assert shown == f"a\\u{code:04x}b שלום \\x1b"


@pytest.mark.parametrize("goal", ["x" * 200, "redémarrer nginx — le cache est plein", "再起動"])
def test_a_goal_of_up_to_200_printable_characters_in_any_script_is_accepted(goal: str) -> None:
    """Printable text in any script, up to 200 characters, is a valid goal."""
    plan = parse_plan(plan_json(goal=goal))
    assert isinstance(plan, Plan)
    assert plan.goal == goal


def test_a_step_reason_is_held_to_the_same_rules_as_the_goal() -> None:
    """A step's reason is also printed to the operator, so an escape sequence in it is
    refused at its path."""
    error = only_error(plan_json(steps=[restart_step(reason="ok\x1b]0;pwned\x07")]))
    assert error.path == "steps.0.reason"
    assert "control character U+001B" in error.message


@pytest.mark.parametrize(("count", "says"), [(0, "at least 1 item"), (9, "at most 8 items")])
def test_a_plan_has_one_to_eight_steps(count: int, says: str) -> None:
    """No steps, or more than eight, is refused at ``steps``."""
    error = only_error(plan_json(steps=[restart_step()] * count))
    assert error.path == "steps"
    assert says in error.message


def test_eight_steps_are_accepted() -> None:
    """Eight steps is the largest plan."""
    plan = parse_plan(plan_json(steps=[restart_step()] * 8))
    assert isinstance(plan, Plan)
    assert len(plan.steps) == 8


@pytest.mark.parametrize("tool", WRITE_TOOLS)
def test_each_tool_validates_its_own_args(tool: str) -> None:
    """Every write tool needs exactly ``args.unit``, a valid unit name: a missing unit,
    an extra argument and a malformed unit are each reported at their own dotted path."""
    plan = plan_json(
        steps=[
            {"tool": tool, "args": {}},
            {"tool": tool, "args": {"unit": "nginx.service", "force": True}},
            {"tool": tool, "args": {"unit": "../../etc/shadow"}},
            {"tool": tool, "args": "nginx.service"},
            {"tool": tool, "args": {"unit": "nginx.service"}},
        ]
    )
    errors = errors_of(plan)
    assert [(e.path, e.message) for e in errors] == [
        ("steps.0.args.unit", "Field required"),
        ("steps.1.args.force", "Extra inputs are not permitted"),
        ("steps.2.args.unit", "unit name must not contain '/'; name a unit, not a path"),
        ("steps.3.args", "Input should be a valid dictionary or instance of UnitArgs"),
    ]


def test_an_unknown_tool_is_reported_at_its_step_with_the_known_tools() -> None:
    """A step naming a tool the executor does not have is refused at ``steps.N``; the
    message lists every known tool so the model can pick one."""
    plan = plan_json(steps=[restart_step(), {"tool": "run_shell", "args": {"unit": "x.service"}}])
    error = only_error(plan)
    assert error.path == "steps.1"
    assert "'run_shell'" in error.message
    for tool in WRITE_TOOLS:
        assert f"'{tool}'" in error.message


def test_a_step_without_a_tool_is_reported_at_its_step() -> None:
    """A step with no ``tool`` key cannot be dispatched: the error is at ``steps.0`` and
    names the missing discriminator."""
    error = only_error(plan_json(steps=[{"args": {"unit": "nginx.service"}}]))
    assert error.path == "steps.0"
    assert "'tool'" in error.message


def test_an_extra_key_in_a_step_is_named() -> None:
    """A step key the schema does not know (``sudo``) is refused at its dotted path."""
    error = only_error(plan_json(steps=[restart_step(sudo=True)]))
    assert error == FieldError(path="steps.0.sudo", message="Extra inputs are not permitted")


def test_paths_name_input_keys_never_the_union_tag() -> None:
    """Paths are the keys the model wrote (``steps.0.args.unit``), not pydantic's
    internal ``steps.0.restart_unit.args.unit``."""
    errors = errors_of(
        plan_json(steps=[{"tool": tool, "args": {"unit": "-x.service"}} for tool in WRITE_TOOLS])
    )
    assert [e.path for e in errors] == [f"steps.{i}.args.unit" for i in range(len(WRITE_TOOLS))]


@pytest.mark.parametrize("value", ["yes", 1, 0, "true", None])
def test_stop_on_error_is_a_strict_boolean(value: Any) -> None:
    """``stop_on_error`` must be JSON true or false: "yes", 1 or null are refused rather
    than guessed at."""
    error = only_error(plan_json(stop_on_error=value))
    assert error.path == "stop_on_error"


@pytest.mark.parametrize(
    ("expect", "path", "says"),
    [
        ({}, "steps.0.expect", "at least one of active_state, sub_state, invocation_id"),
        ({"active_state": ["running"]}, "steps.0.expect.active_state.0", "Input should be"),
        ({"active_state": []}, "steps.0.expect.active_state", "at least 1 item"),
        ({"sub_state": ["Dead Beef"]}, "steps.0.expect.sub_state.0", "should match pattern"),
        ({"invocation_id": "not-hex"}, "steps.0.expect.invocation_id", "should match pattern"),
        ({"active_state": ["failed"], "pid": 1}, "steps.0.expect.pid", "Extra inputs"),
    ],
)
def test_a_step_precondition_is_validated_field_by_field(
    expect: dict[str, Any], path: str, says: str
) -> None:
    """``expect`` (the state the unit must still be in at apply time) needs at least one
    known field, each well-formed; errors point into it."""
    error = only_error(plan_json(steps=[restart_step(expect=expect)]))
    assert error.path == path
    assert says in error.message


@pytest.mark.parametrize(
    ("data", "type_name"),
    [([plan_json()], "list"), ("restart nginx", "str"), (None, "NoneType"), (3, "int")],
)
def test_a_plan_that_is_not_an_object_is_one_error_for_the_whole(data: Any, type_name: str) -> None:
    """A plan must be a JSON object; anything else is one error with an empty path."""
    assert parse_plan(data) == [
        FieldError(path="", message=f"a plan is a JSON object, not {type_name}")
    ]


def test_a_field_error_prints_as_path_and_message() -> None:
    """FieldErrors print as ``path: message`` (just the message for the whole input),
    the form logs and REVISE summaries use."""
    assert str(FieldError(path="steps.0.args.unit", message="bad")) == "steps.0.args.unit: bad"
    assert str(FieldError(path="", message="not an object")) == "not an object"


def test_units_lists_each_unit_once_in_step_order() -> None:
    """``Plan.units()`` is what ``opsbot plans`` shows: each unit once, in step order."""
    plan = parse_plan(
        plan_json(
            steps=[
                {"tool": "reset_failed_unit", "args": {"unit": "web.service"}},
                restart_step("db.service"),
                restart_step("web.service"),
            ]
        )
    )
    assert isinstance(plan, Plan)
    assert plan.units() == ["web.service", "db.service"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
plan_like = st.fixed_dictionaries(
    {},
    optional={
        "goal": json_values,
        "steps": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "tool": st.sampled_from([*WRITE_TOOLS, "nope"]) | json_values,
                    "args": st.fixed_dictionaries({}, optional={"unit": json_values}) | json_values,
                    "expect": json_values,
                    "reason": json_values,
                },
            )
            | json_values,
            max_size=9,
        )
        | json_values,
        "stop_on_error": json_values,
    },
)


@settings(max_examples=200, deadline=None)
@given(data=json_values | plan_like)
def test_any_json_value_gives_a_plan_or_field_errors_never_an_exception(data: Any) -> None:
    """Whatever JSON a model produces, parse_plan answers with a Plan or a non-empty list
    of FieldErrors; it never raises."""
    result = parse_plan(data)
    if not isinstance(result, Plan):
        assert result
        assert all(isinstance(e, FieldError) for e in result)
