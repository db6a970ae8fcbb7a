"""A policy backed by any OpenAI-compatible chat completions server, with native tool calls.

One request per turn: ``POST {api_url}/chat/completions`` with the provider-neutral
prompt (prompt.py) in OpenAI's format (openai_wire.py), through a client that retries
what retrying can fix (http_retry.py). A reply becomes one action; the tokens it cost
come with it. A server that gives no usable reply raises ModelUnavailable, which the
runtime turns into a note.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx
import structlog

from diagnose_svc.actions import CallTool, Policy, Proposal, ToolSpec, Transcript
from diagnose_svc.model_settings import ModelEndpoint
from diagnose_svc.policies.http_retry import ModelClient, ModelUnavailable
from diagnose_svc.policies.openai_wire import NotACompletion, proposal_from_reply, request_body

__all__ = ["ModelUnavailable", "OpenAICompatPolicy"]

log = structlog.get_logger("diagnose_svc.policies.openai_compat")


class OpenAICompatPolicy:
    """The :class:`~diagnose_svc.actions.Policy` of ``[diagnose.model] kind = "openai"``.

    ``transport``, ``retry_base_delay``, ``retry_max_delay`` and ``sleep`` go to the
    client (http_retry.ModelClient). Close it, or use it as a context manager.
    """

    name = "openai"

    def __init__(
        self,
        settings: ModelEndpoint,
        *,
        transport: httpx.BaseTransport | None = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.endpoint = f"{settings.api_url}/chat/completions"
        self._client = ModelClient(
            settings,
            self.endpoint,
            transport=transport,
            base_delay=retry_base_delay,
            max_delay=retry_max_delay,
            sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatPolicy(endpoint={self.endpoint!r}, model={self.settings.model!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatPolicy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        self.close()
        return False

    def request_body(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The JSON body of one chat completions request."""
        return request_body(self.settings.model, transcript, tools)

    def propose(self, transcript: Transcript, tools: Sequence[ToolSpec]) -> Proposal:
        reply = self._client.post(self.request_body(transcript, tools))
        try:
            proposal = proposal_from_reply(reply)
        except NotACompletion as exc:
            raise self._client.unavailable(str(exc)) from exc
        action = proposal.action
        log.info(
            "model.replied",
            action=action.kind,
            tool=action.tool if isinstance(action, CallTool) else None,
            prompt_tokens=proposal.prompt_tokens,
            completion_tokens=proposal.completion_tokens,
        )
        return proposal


def _satisfies_the_protocol(policy: OpenAICompatPolicy) -> Policy:
    return policy  # mypy checks OpenAICompatPolicy against Policy here
