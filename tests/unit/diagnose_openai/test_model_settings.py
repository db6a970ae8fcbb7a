"""Resolving URL, model and API key from the environment, systemd credentials and config,
with the key kept out of reprs and messages."""

from pathlib import Path

import pytest

from diagnose_svc.actions import Transcript
from diagnose_svc.model_settings import (
    ModelEndpoint,
    ModelSettingsError,
    resolve_model_endpoint,
)
from diagnose_svc.policies import OpenAICompatPolicy
from shared_schema import ModelSettings
from testbed.scripted_openai import ScriptedOpenAI, ToolCall
from tests.unit.diagnose_openai.conftest import API_KEY

CONFIG = ModelSettings(
    kind="openai",
    api_url="http://config.example:8080/v1",
    model="config-model",
    timeout_seconds=12.5,
    max_retries=1,
)


def _credentials(directory: Path, **files: str) -> dict[str, str]:
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return {"CREDENTIALS_DIRECTORY": str(directory)}


def test_config_alone_gives_url_model_and_limits() -> None:
    """With nothing in the environment, [diagnose.model] supplies URL and model, the limits
    come along, and there is no key."""
    settings = resolve_model_endpoint(CONFIG, environ={})

    assert settings.api_url == "http://config.example:8080/v1"
    assert settings.model == "config-model"
    assert (settings.timeout_seconds, settings.max_retries) == (12.5, 1)
    assert settings.api_key is None
    assert dict(settings.sources) == {"api_url": "config", "model": "config"}


def test_key_is_loaded_from_the_credentials_directory(tmp_path: Path) -> None:
    """llm_api_key in $CREDENTIALS_DIRECTORY (LoadCredential=) is the key, its trailing
    newline stripped; llm_api_url and llm_model there beat the config."""
    env = _credentials(
        tmp_path / "creds",
        llm_api_key=API_KEY + "\n",
        llm_api_url="http://cred.example/v1\n",
        llm_model="cred-model\n",
    )

    settings = resolve_model_endpoint(CONFIG, environ=env)

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == API_KEY
    assert (settings.api_url, settings.model) == ("http://cred.example/v1", "cred-model")
    assert settings.sources["api_key"] == "credential llm_api_key"


def test_environment_beats_credentials_and_config(tmp_path: Path) -> None:
    """LLM_API_URL, LLM_MODEL and LLM_API_KEY win over credential files and config."""
    env = _credentials(tmp_path / "creds", llm_api_key="from-file", llm_model="cred-model")
    env |= {
        "LLM_API_URL": "http://env.example:1234/v1/",
        "LLM_MODEL": "env-model",
        "LLM_API_KEY": API_KEY,
    }

    settings = resolve_model_endpoint(CONFIG, environ=env)

    assert (settings.api_url, settings.model) == ("http://env.example:1234/v1", "env-model")
    assert settings.api_key is not None and settings.api_key.get_secret_value() == API_KEY
    assert dict(settings.sources) == {
        "api_url": "env LLM_API_URL",
        "model": "env LLM_MODEL",
        "api_key": "env LLM_API_KEY",
    }


def test_empty_values_count_as_unset(tmp_path: Path) -> None:
    """An empty variable or an empty credential file falls through to the next source."""
    env = _credentials(tmp_path / "creds", llm_api_key="\n", llm_model="")
    env |= {"LLM_API_KEY": "", "LLM_MODEL": "  "}

    settings = resolve_model_endpoint(CONFIG, environ=env)

    assert settings.api_key is None
    assert settings.model == "config-model"


def test_key_is_hidden_in_repr_and_str(tmp_path: Path) -> None:
    """The resolved settings print the key as asterisks, in repr and in str."""
    env = _credentials(tmp_path / "creds", llm_api_key=API_KEY)

    settings = resolve_model_endpoint(CONFIG, environ=env)

    assert API_KEY not in repr(settings) and API_KEY not in str(settings)
    assert "**********" in repr(settings)


@pytest.mark.parametrize(
    ("config", "env", "names"),
    [
        (ModelSettings(kind="openai", model="m"), {}, ["LLM_API_URL", "llm_api_url", "api_url"]),
        (
            ModelSettings(kind="openai", api_url="http://h/v1"),
            {},
            ["LLM_MODEL", "llm_model", "model"],
        ),
    ],
)
def test_missing_url_or_model_is_a_clear_error(
    config: ModelSettings, env: dict[str, str], names: list[str]
) -> None:
    """kind=openai without a URL (or a model) raises ModelSettingsError naming every place
    the value could be set."""
    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(config, environ=env)

    assert 'kind = "openai"' in raised.value.message
    assert raised.value.hint is not None
    assert all(name in raised.value.hint for name in names)


def test_a_value_that_is_no_url_is_refused_without_quoting_it() -> None:
    """An LLM_API_URL that is not an http(s) URL is refused; the value is not echoed, in
    case a key was put in the wrong variable."""
    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(CONFIG, environ={"LLM_API_URL": API_KEY})

    assert "env LLM_API_URL is not an http(s) URL" in str(raised.value)
    assert API_KEY not in str(raised.value)


@pytest.mark.parametrize(
    "url", ["http://user:secret@h.example/v1", "http://h.example/v1?key=secret"]
)
def test_url_with_credentials_or_query_is_refused(url: str) -> None:
    """api_url may not carry user info or a query: keys go in LLM_API_KEY, and requests
    go to <api_url>/chat/completions."""
    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(CONFIG, environ={"LLM_API_URL": url})

    assert "secret" not in str(raised.value)


@pytest.mark.parametrize("key", ["sk-two words", "sk-line\nbreak", "sk-schlüssel"])
def test_key_a_header_cannot_carry_is_refused_without_showing_it(key: str) -> None:
    """A key with spaces, control or non-ASCII characters is refused at start-up, and the
    message does not show it."""
    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(CONFIG, environ={"LLM_API_KEY": key})

    assert "env LLM_API_KEY" in raised.value.message
    assert "sk-" not in str(raised.value)


def test_unreadable_credential_names_the_file(tmp_path: Path) -> None:
    """A credential that cannot be read (here a directory) raises ModelSettingsError
    naming the path and pointing at LoadCredential=."""
    env = _credentials(tmp_path / "creds")
    (tmp_path / "creds" / "llm_api_key").mkdir()

    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(CONFIG, environ=env)

    assert str(tmp_path / "creds" / "llm_api_key") in raised.value.message
    assert raised.value.hint is not None and "LoadCredential=" in raised.value.hint


def test_a_credential_others_may_write_is_refused_without_showing_it(tmp_path: Path) -> None:
    """Whoever may write the key file may point the diagnosis at their own key: a
    credential writable by group or others is refused, naming the file and the fix, and
    its content is never quoted."""
    env = _credentials(tmp_path / "creds", llm_api_key="sk-secret-from-file")
    (tmp_path / "creds" / "llm_api_key").chmod(0o666)

    with pytest.raises(ModelSettingsError) as raised:
        resolve_model_endpoint(CONFIG, environ=env)

    key = tmp_path / "creds" / "llm_api_key"
    assert raised.value.message.startswith(f"credential {key} is writable by group or others")
    assert f"chmod 0600 {key}" in raised.value.message
    assert "sk-secret" not in str(raised.value)


def test_settings_built_directly_are_checked_too() -> None:
    """ModelEndpoint validates on construction: an empty model is refused."""
    with pytest.raises(ModelSettingsError, match="model name"):
        ModelEndpoint(api_url="http://h.example/v1", model=" ")


def test_key_from_credentials_reaches_the_server_as_bearer(tmp_path: Path) -> None:
    """End to end: a key loaded from the credentials directory is what the model server
    receives as the Bearer token."""
    with ScriptedOpenAI([ToolCall("final_note", {"text": "ok"})]) as server:
        env = _credentials(tmp_path / "creds", llm_api_key=API_KEY)
        env["LLM_API_URL"] = server.base_url
        with OpenAICompatPolicy(resolve_model_endpoint(CONFIG, environ=env)) as policy:
            policy.propose(Transcript(unit="web.service"), [])

    assert server.chat_requests[0].headers["authorization"] == f"Bearer {API_KEY}"
