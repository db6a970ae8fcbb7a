"""The names opsbot's own units and users have on every host (units/, sysusers.d)."""

__all__ = [
    "APPLY_PATH",
    "APPLY_TIMER",
    "APPLY_UNIT",
    "EXECUTOR_UNIT",
    "EXECUTOR_USER",
    "POLKIT_RULE_UNIT",
]

#: The executor's user: it owns the plan store and runs the steps (held by polkit).
EXECUTOR_USER = "opsbot-executor"
#: The unit that takes plans; its ``plan.accepted`` entries are what root trusts.
EXECUTOR_UNIT = "opsbot-executor.service"
#: The unit that runs approved plans (opsbot-apply), started by its path unit when an
#: approval appears, by its timer every minute, or by ``opsbot apply``.
APPLY_UNIT = "opsbot-apply.service"
APPLY_PATH = "opsbot-apply.path"
APPLY_TIMER = "opsbot-apply.timer"
#: Root's unit that writes the polkit rule again (daily, and after an approval is
#: archived, when it first removes the grants whose approval no longer holds).
POLKIT_RULE_UNIT = "opsbot-polkit-rule.service"
