"""Plans as diagnosis writes them (plain JSON values), for the schema tests."""

from typing import Any

from hypothesis import strategies as st

from shared_schema import WRITE_TOOLS


def restart_step(unit: str = "nginx.service", **extra: Any) -> dict[str, Any]:
    """One step, as JSON: restart ``unit``."""
    return {"tool": "restart_unit", "args": {"unit": unit}, **extra}


def plan_json(**overrides: Any) -> dict[str, Any]:
    """A valid plan as JSON, with ``overrides`` replacing its top-level keys."""
    plan: dict[str, Any] = {
        "goal": "bring nginx back after its config reload failed",
        "steps": [restart_step()],
    }
    plan.update(overrides)
    return plan


ACTIVE_STATES = (
    "active",
    "reloading",
    "inactive",
    "failed",
    "activating",
    "deactivating",
    "maintenance",
)

units = st.from_regex(
    r"[a-z][a-z0-9_:-]{0,20}(@[a-z0-9]{1,8})?\.(service|socket|timer|path|mount|target)",
    fullmatch=True,
)
free_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")),
    min_size=1,
    max_size=60,
).filter(lambda s: bool(s.strip()))
expects = st.fixed_dictionaries(
    {},
    optional={
        "active_state": st.lists(st.sampled_from(ACTIVE_STATES), min_size=1, max_size=3),
        "sub_state": st.lists(
            st.from_regex(r"[a-z-]{1,12}", fullmatch=True), min_size=1, max_size=3
        ),
        "invocation_id": st.from_regex(r"[0-9a-f]{32}", fullmatch=True),
    },
).filter(bool)
steps = st.fixed_dictionaries(
    {"tool": st.sampled_from(WRITE_TOOLS), "args": st.fixed_dictionaries({"unit": units})},
    optional={"expect": expects, "reason": free_text},
)
plans = st.fixed_dictionaries(
    {"goal": free_text, "steps": st.lists(steps, min_size=1, max_size=8)},
    optional={"stop_on_error": st.booleans()},
)
