"""Where a hosted model is and how to reach it: URL, model name, API key (for any
provider: the OpenAI-compatible one today).

Each value is taken from the first of these that has it (an empty value counts as unset):

1. the environment: ``LLM_API_URL``, ``LLM_MODEL``, ``LLM_API_KEY``;
2. systemd credentials: files ``llm_api_url``, ``llm_model``, ``llm_api_key`` in
   ``$CREDENTIALS_DIRECTORY`` (what ``LoadCredential=`` / ``SetCredential=`` provide);
3. the config file's ``[diagnose.model]`` ``api_url`` and ``model`` (never a key: keys
   do not live in config).

A command that takes a URL or a model name (``python -m diagnose_svc.replay --model-url``,
``--model-name``) passes them as ``api_url`` / ``model``: they come before all three. A key
is never taken from a command line.

The key is held as a :class:`pydantic.SecretStr`; its repr and str are asterisks, and no
message or log event of this module contains it. Call :func:`resolve_model_endpoint`
only when ``[diagnose.model] kind`` names a hosted model.

Errors: :class:`ModelSettingsError`, a ``diagnose_svc.errors.ConfigError`` (``.message``,
``.hint``), for a missing or invalid value or an unreadable credential file.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import HttpUrl, SecretStr, TypeAdapter, ValidationError

from diagnose_svc.errors import ConfigError
from shared_io.trusted import untrusted_reason
from shared_schema.config import ModelSettings

ENV_API_URL = "LLM_API_URL"
ENV_MODEL = "LLM_MODEL"
ENV_API_KEY = "LLM_API_KEY"
CREDENTIAL_API_URL = "llm_api_url"
CREDENTIAL_MODEL = "llm_model"
CREDENTIAL_API_KEY = "llm_api_key"

_URL = TypeAdapter(HttpUrl)
# An HTTP header value may hold visible ASCII only; anything else would either be refused
# by httpx with an error that quotes the value, or smuggle a second header.
#: A credential is one short line; read no more than this of it.
MAX_CREDENTIAL_BYTES = 65536
_HEADER_SAFE = frozenset(chr(c) for c in range(0x21, 0x7F))


class ModelSettingsError(ConfigError):
    """The model cannot be configured: a value is missing, invalid or unreadable."""


@dataclass(frozen=True)
class ModelEndpoint:
    """Everything a hosted model's policy needs to make requests.

    ``api_url`` is the API base, normalised without a trailing slash
    (``http://127.0.0.1:8080/v1``); it may carry no user info, query or fragment, so it
    can be shown as it is. ``sources`` says where each value came from (``"env
    LLM_MODEL"``, ``"credential llm_api_key"``, ``"config"``), for messages; it never
    holds a value.
    """

    api_url: str
    model: str
    api_key: SecretStr | None = None
    timeout_seconds: float = 60.0
    max_retries: int = 3
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        source = self.sources.get
        object.__setattr__(self, "api_url", _check_url(self.api_url, source("api_url", "settings")))
        if not self.model.strip():
            raise ModelSettingsError(f"the model name from {source('model', 'settings')} is empty")
        if self.api_key is not None and not set(self.api_key.get_secret_value()) <= _HEADER_SAFE:
            # Never quote the key, not even the offending character.
            raise ModelSettingsError(
                f"the API key from {source('api_key', 'settings')} holds characters an HTTP "
                "header cannot carry (spaces, control or non-ASCII characters)",
                hint="store the bare key, on one line",
            )


def _read_credential(directory: Path, name: str) -> str | None:
    path = directory / name
    try:
        with path.open("rb") as f:
            untrusted = untrusted_reason(path, os.fstat(f.fileno()), secret=True)
            text = f.read(MAX_CREDENTIAL_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ModelSettingsError(
            f"cannot read credential {path}: {reason}",
            hint="check LoadCredential= in the unit and the source file's permissions",
        ) from None
    if untrusted:
        raise ModelSettingsError(f"credential {untrusted}")
    return text.strip() or None


def _pick(
    env: Mapping[str, str], env_name: str, creds: Path | None, cred_name: str
) -> tuple[str | None, str]:
    value = env.get(env_name, "").strip()
    if value:
        return value, f"env {env_name}"
    if creds is not None:
        from_file = _read_credential(creds, cred_name)
        if from_file:
            return from_file, f"credential {cred_name}"
    return None, ""


def _check_url(url: str, source: str) -> str:
    try:
        parsed = _URL.validate_python(url)
    except ValidationError:
        # Not quoted: a value that is no URL may be a key put in the wrong variable.
        raise ModelSettingsError(
            f"api_url from {source} is not an http(s) URL",
            hint="give the API base, for example http://127.0.0.1:8080/v1",
        ) from None
    if parsed.username or parsed.password:
        raise ModelSettingsError(
            f"api_url from {source} carries user info; credentials do not go in URLs",
            hint=f"put the key in ${ENV_API_KEY} or the {CREDENTIAL_API_KEY} credential",
        )
    if parsed.query or parsed.fragment:
        raise ModelSettingsError(
            f"api_url from {source} has a query or fragment; give the plain API base",
            hint="for example http://127.0.0.1:8080/v1 (requests go to <api_url>/chat/completions)",
        )
    return str(parsed).rstrip("/")


def resolve_model_endpoint(
    config: ModelSettings,
    environ: Mapping[str, str] | None = None,
    *,
    api_url: str | None = None,
    model: str | None = None,
) -> ModelEndpoint:
    """Resolve URL, model and key for ``kind = "openai"`` (see the module docstring).

    ``environ`` defaults to ``os.environ``; ``$CREDENTIALS_DIRECTORY`` is read from it.
    ``api_url`` and ``model``, when given (a command line's), come before everything.
    Raises :class:`ModelSettingsError` when the URL or model is missing or invalid, the
    key cannot be sent in a header, or a credential file cannot be read.
    """
    env = os.environ if environ is None else environ
    creds_dir = env.get("CREDENTIALS_DIRECTORY", "").strip()
    creds = Path(creds_dir) if creds_dir else None
    sources: dict[str, str] = {}

    url, source = (api_url, "the command line") if api_url else (None, "")
    if url is None:
        url, source = _pick(env, ENV_API_URL, creds, CREDENTIAL_API_URL)
    if url is None and config.api_url is not None:
        url, source = str(config.api_url), "config"
    if url is None:
        raise ModelSettingsError(
            'kind = "openai" needs the API URL, and none is set',
            hint=f"set ${ENV_API_URL}, the {CREDENTIAL_API_URL} credential, "
            "or [diagnose.model] api_url",
        )
    sources["api_url"] = source

    name, source = (model, "the command line") if model else (None, "")
    if name is None:
        name, source = _pick(env, ENV_MODEL, creds, CREDENTIAL_MODEL)
    if name is None and config.model:
        name, source = config.model, "config"
    if name is None:
        raise ModelSettingsError(
            'kind = "openai" needs a model name, and none is set',
            hint=f"set ${ENV_MODEL}, the {CREDENTIAL_MODEL} credential, or [diagnose.model] model",
        )
    sources["model"] = source

    key, source = _pick(env, ENV_API_KEY, creds, CREDENTIAL_API_KEY)
    if key is not None:
        sources["api_key"] = source

    return ModelEndpoint(
        api_url=url,
        model=name,
        api_key=None if key is None else SecretStr(key),
        timeout_seconds=config.timeout_seconds,
        max_retries=config.max_retries,
        sources=sources,
    )
