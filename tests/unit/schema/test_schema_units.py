"""Unit names and plan ids: the grammar both halves check before anything reaches
systemctl. Each refusal says what to change."""

import pytest

from shared_schema import (
    BUILTIN_DENYLIST,
    PLAN_ID_PATTERN,
    UNIT_NAME_MAX,
    FieldError,
    Plan,
    denied_reason,
    is_valid_plan_id,
    is_valid_unit_name,
    parse_plan,
)

from .plans import plan_json, restart_step

VALID_UNITS = [
    "app.service",
    "foo@bar.service",
    "getty@.service",
    "a:b-c_d.socket",
    "x.timer",
    "var-lib-data.mount",
    "foo\\x2dbar.service",
    "a" * (UNIT_NAME_MAX - len(".service")) + ".service",
]


def unit_error(unit: object) -> FieldError:
    result = parse_plan(plan_json(steps=[restart_step(unit)]))  # type: ignore[arg-type]
    assert isinstance(result, list), f"{unit!r} was accepted"
    assert len(result) == 1, result
    assert result[0].path == "steps.0.args.unit"
    return result[0]


@pytest.mark.parametrize("unit", VALID_UNITS)
def test_systemd_unit_names_are_accepted(unit: str) -> None:
    """Names systemd accepts (instances, templates, ':' '_' '-', escapes, 256 chars)
    are valid in a plan."""
    assert is_valid_unit_name(unit)
    plan = parse_plan(plan_json(steps=[restart_step(unit)]))
    assert isinstance(plan, Plan)
    assert plan.steps[0].args.unit == unit


@pytest.mark.parametrize(
    ("unit", "says"),
    [
        ("-app.service", "unit name must not start with '-'"),
        ("--force.service", "unit name must not start with '-'"),
        ("/etc/systemd/system/app.service", "must not contain '/'; name a unit, not a path"),
        ("a/b.service", "must not contain '/'"),
        ("nginx", "'nginx' is not a valid unit name"),
        ("nginx.exe", "'nginx.exe' is not a valid unit name"),
        ("a" * 249 + ".service", "unit name is 257 characters long; systemd allows 256"),
        ("", "'' is not a valid unit name"),
        ("my app.service", "'my app.service' is not a valid unit name"),
        ("nginx.service ", "is not a valid unit name"),
        ("ngïnx.service", "is not a valid unit name"),
        ("nginx.service\n", "is not a valid unit name"),
        ("a@b@c.service", "is not a valid unit name"),
        (".service", "is not a valid unit name"),
    ],
)
def test_malformed_unit_names_are_refused_with_a_message_saying_why(unit: str, says: str) -> None:
    """Leading '-', a path, a missing or unknown suffix, more than 256 characters,
    empty, spaces, non-ASCII: each is refused at steps.N.args.unit with a reason."""
    assert not is_valid_unit_name(unit)
    assert says in unit_error(unit).message


def test_the_grammar_message_lists_the_allowed_characters_and_suffixes() -> None:
    """The generic refusal tells a model exactly what a unit name may contain: the
    characters (backslash shown once) and every known suffix."""
    message = unit_error("nginx.exe").message
    assert (
        "use letters, digits, ':', '_', '.', '\\', '-', an optional '@instance', and a suffix"
        in message
    )
    for suffix in ("service", "socket", "target", "mount", "timer", "path", "slice", "scope"):
        assert suffix in message


def test_a_very_long_bad_name_is_quoted_shortened() -> None:
    """A 200-character bad name is quoted at most 80 characters long in the message."""
    message = unit_error("x" * 200).message
    assert "x" * 81 not in message
    assert "'" + "x" * 80 + "'" in message


def test_a_unit_name_must_be_a_string() -> None:
    """A number where a unit name belongs is refused, not converted."""
    assert unit_error(123).message == "Input should be a valid string"


@pytest.mark.parametrize(
    "unit",
    [
        "sshd.service",
        "ssh.socket",
        "systemd-journald.service",
        "dbus.service",
        "dbus-broker.service",
        "opsbot-executor.service",
        "opsbot-diagnose.service",
        "polkit.service",
        "getty@tty1.service",
        "serial-getty@ttyS0.service",
        "init.scope",
        "-.slice",
        "user.slice",
        "session-1.scope",
        "dev-sda.device",
        "swapfile.swap",
    ],
)
def test_opsbot_itself_systemd_and_the_ways_in_are_on_the_builtin_denylist(unit: str) -> None:
    """No plan may touch opsbot, systemd's daemons, the bus, polkit, ssh, gettys or the
    unit kinds that are not services: each such name has a denylist entry."""
    assert denied_reason(unit) in BUILTIN_DENYLIST


@pytest.mark.parametrize("unit", ["nginx.service", "app.service", "postgresql@15-main.service"])
def test_ordinary_services_are_not_denied(unit: str) -> None:
    """An ordinary application service is not on the denylist."""
    assert denied_reason(unit) is None


@pytest.mark.parametrize("plan_id", ["20261129-213500-1a2b3c4d", "19991231-235959-00000000"])
def test_plan_ids_look_like_a_timestamp_and_eight_hex_digits(plan_id: str) -> None:
    """``YYYYMMDD-HHMMSS-xxxxxxxx`` is a plan id."""
    assert is_valid_plan_id(plan_id)
    assert PLAN_ID_PATTERN.startswith("^") and PLAN_ID_PATTERN.endswith("$")


@pytest.mark.parametrize(
    "plan_id",
    [
        "",
        "../x",
        "a/b",
        "20261129-213500-1a2b3c4d.json",
        "20261129-213500-1A2B3C4D",
        "20261129-213500-1a2b3c4d\n",
        "../20261129-213500-1a2b3c4d",
        "20261129213500-1a2b3c4d",
    ],
)
def test_anything_else_is_not_a_plan_id(plan_id: str) -> None:
    """Paths, suffixes, upper-case hex and trailing newlines are not plan ids."""
    assert not is_valid_plan_id(plan_id)
