"""Policies: what proposes the next action of a diagnosis run.

``RunbookPolicy`` (runbook.py) is the embedded, deterministic, offline default;
``OpenAICompatPolicy`` (openai_compat.py) asks an OpenAI-compatible model when
``[diagnose.model] kind = "openai"``. Both implement ``diagnose_svc.actions.Policy``.
"""

from diagnose_svc.policies.openai_compat import ModelUnavailable, OpenAICompatPolicy
from diagnose_svc.policies.runbook import RunbookPolicy

__all__ = ["ModelUnavailable", "OpenAICompatPolicy", "RunbookPolicy"]
