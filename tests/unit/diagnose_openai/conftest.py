"""Fixtures: a real scripted server on 127.0.0.1 and policies pointed at it."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from diagnose_svc.actions import ToolSpec, Transcript
from diagnose_svc.model_settings import ModelEndpoint
from diagnose_svc.policies.openai_compat import OpenAICompatPolicy
from testbed.scripted_openai import ScriptedOpenAI

API_KEY = "sk-test-7f3a9c1e5b2d4a6f8e0c"

UNIT_STATUS = ToolSpec(
    name="unit_status",
    description="Show a unit's state, result and last exit status.",
    parameters={
        "type": "object",
        "properties": {"unit": {"type": "string"}},
        "required": ["unit"],
    },
)
JOURNAL = ToolSpec(
    name="journal",
    description="Show the unit's last journal lines.",
    parameters={
        "type": "object",
        "properties": {"unit": {"type": "string"}, "lines": {"type": "integer"}},
        "required": ["unit"],
    },
)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as running:
        yield running


@pytest.fixture
def transcript() -> Transcript:
    return Transcript(unit="web.service", symptom="exited with status 1")


class Sleeps(list[float]):
    """A stand-in for time.sleep that remembers what it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


MakePolicy = Callable[..., OpenAICompatPolicy]


@pytest.fixture
def make_policy(sleeps: Sleeps) -> Iterator[MakePolicy]:
    """Build policies (closed at teardown); by default at ``api_url`` with recorded sleeps."""
    made: list[OpenAICompatPolicy] = []

    def make(
        api_url: str,
        *,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout_seconds: float = 5.0,
        **kwargs: Any,
    ) -> OpenAICompatPolicy:
        settings = ModelEndpoint(
            api_url=api_url,
            model="test-model",
            api_key=None if api_key is None else SecretStr(api_key),
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
        )
        kwargs.setdefault("sleep", sleeps)
        policy = OpenAICompatPolicy(settings, **kwargs)
        made.append(policy)
        return policy

    yield make
    for policy in made:
        policy.close()
