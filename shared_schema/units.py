"""The pydantic types of unit names, plan ids and fingerprints, built on the grammar of
shared_schema.names (the console's JSON Schema states the same patterns:
shared_schema.console_schema)."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from shared_schema.names import (
    _UNIT_RE,
    BUILTIN_DENYLIST,
    PLAN_ID_PATTERN,
    UNIT_NAME_MAX,
    UNIT_NAME_PATTERN,
    UNIT_SUFFIXES,
    denied_reason,
    is_valid_plan_id,
    is_valid_unit_name,
)

__all__ = [
    "BUILTIN_DENYLIST",
    "PLAN_ID_PATTERN",
    "UNIT_NAME_MAX",
    "UNIT_NAME_PATTERN",
    "PlanId",
    "Sha256Hex",
    "UnitName",
    "denied_reason",
    "is_valid_plan_id",
    "is_valid_unit_name",
]


def check_unit(name: str) -> str:
    if len(name) > UNIT_NAME_MAX:
        raise ValueError(
            f"unit name is {len(name)} characters long; systemd allows {UNIT_NAME_MAX}"
        )
    if name.startswith("-"):
        raise ValueError("unit name must not start with '-'")
    if "/" in name:
        raise ValueError("unit name must not contain '/'; name a unit, not a path")
    if _UNIT_RE.fullmatch(name) is None:
        raise ValueError(
            f"{name[:80]!r} is not a valid unit name: use letters, digits, ':', '_', '.', "
            f"'\\', '-', an optional '@instance', and a suffix such as .service "
            f"(one of {', '.join(UNIT_SUFFIXES)})"
        )
    return name


def check_plan_id(value: str) -> str:
    if not is_valid_plan_id(value):
        raise ValueError(f"{value[:80]!r} is not a plan id; ids look like 20261129-213500-1a2b3c4d")
    return value


UnitName = Annotated[str, StringConstraints(strict=True), AfterValidator(check_unit)]
PlanId = Annotated[str, StringConstraints(strict=True), AfterValidator(check_plan_id)]
Sha256Hex = Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]
