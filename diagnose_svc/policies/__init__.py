"""Policies: what proposes the next action of a diagnosis run.

``RunbookPolicy`` (runbook/) is the embedded, deterministic, offline default;
``OpenAICompatPolicy`` (openai_compat.py) asks an OpenAI-compatible model when
``[diagnose.model] kind = "openai"``. Both implement ``diagnose_svc.actions.Policy``.
A hosted model's policy is made of the provider-neutral prompt (prompt.py), its
provider's wire format (openai_wire.py) and the retrying HTTP client (http_retry.py);
:func:`make_policy` picks one by ``kind``.
"""

from diagnose_svc.actions import Policy
from diagnose_svc.model_settings import resolve_model_endpoint
from diagnose_svc.policies.openai_compat import ModelUnavailable, OpenAICompatPolicy
from diagnose_svc.policies.runbook import RunbookPolicy
from shared_schema import DiagnoseSettings

__all__ = ["ModelUnavailable", "OpenAICompatPolicy", "RunbookPolicy", "make_policy"]


def make_policy(settings: DiagnoseSettings) -> Policy:
    """The policy ``[diagnose.model] kind`` asks for."""
    if settings.model.kind == "openai":
        return OpenAICompatPolicy(resolve_model_endpoint(settings.model))
    return RunbookPolicy(settings)
