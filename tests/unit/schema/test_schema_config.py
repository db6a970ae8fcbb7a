"""/etc/opsbot/opsbot.toml as models: a typo, a denylisted unit or a broken regex is a
ValidationError that names the key, so ``opsbot check-config`` can say where."""

import tomllib
from typing import Any

import pytest
from pydantic import ValidationError

from shared_schema import FieldError, OpsbotConfig, field_errors

REALISTIC = """
[executor]
step_timeout_seconds = 30
approval_ttl_seconds = 900

[executor.allow]
restart_unit = ["nginx.service", "app@blue.service"]
reset_failed_unit = ["nginx.service"]

[diagnose]
watch = ["nginx.service", "app@blue.service"]
redact_patterns = ['(?i)password=\\S+', 'Bearer [A-Za-z0-9._-]+']

[diagnose.health.web]
url = "http://127.0.0.1:8080/healthz"
unit = "nginx.service"
"""


def config_errors(data: dict[str, Any]) -> list[FieldError]:
    with pytest.raises(ValidationError) as caught:
        OpsbotConfig.model_validate(data)
    return field_errors(caught.value)


def test_a_realistic_config_file_is_read() -> None:
    """The config an operator would write parses, and its allowlist answers per tool."""
    config = OpsbotConfig.model_validate(tomllib.loads(REALISTIC))
    policy = config.executor
    assert policy.allows("restart_unit", "app@blue.service")
    assert policy.allows("reset_failed_unit", "nginx.service")
    assert not policy.allows("stop_unit", "nginx.service")
    assert not policy.allows("restart_unit", "redis.service")
    assert config.diagnose.health["web"].unit == "nginx.service"


def test_an_absent_config_means_an_empty_allowlist() -> None:
    """With no settings at all, the executor may do nothing."""
    config = OpsbotConfig()
    assert config.executor.allow == {}
    assert not config.executor.allows("restart_unit", "nginx.service")


@pytest.mark.parametrize(
    "unit",
    ["sshd.service", "systemd-journald.service", "dbus.service", "opsbot-executor.service"],
)
def test_a_denylisted_unit_in_the_allowlist_is_an_error_naming_executor_allow(unit: str) -> None:
    """No config can allow opsbot to touch ssh, journald, the bus or itself: listing one
    is an error at ``executor.allow`` naming the unit and the denylist entry."""
    errors = config_errors({"executor": {"allow": {"restart_unit": ["nginx.service", unit]}}})
    assert len(errors) == 1
    assert errors[0].path == "executor.allow"
    assert f"restart_unit: {unit!r} matches the built-in denylist entry" in errors[0].message
    assert "no configuration can allow it" in errors[0].message


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"exeuctor": {}}, "exeuctor"),
        ({"executor": {"alow": {}}}, "executor.alow"),
        ({"diagnose": {"model": {"api_key": "sk-..."}}}, "diagnose.model.api_key"),
        (
            {"diagnose": {"health": {"web": {"url": "http://x/", "method": "POST"}}}},
            "diagnose.health.web.method",
        ),
    ],
)
def test_an_unknown_key_is_an_error_naming_it(data: dict[str, Any], path: str) -> None:
    """A misspelt or unsupported key is not silently ignored: the error names it by its
    dotted path (an API key in the config file is refused too)."""
    assert config_errors(data) == [FieldError(path=path, message="Extra inputs are not permitted")]


def test_a_bad_redact_pattern_is_an_error_naming_it() -> None:
    """A redact pattern that is not a valid regex is refused at
    ``diagnose.redact_patterns``, quoting the pattern and its position."""
    errors = config_errors({"diagnose": {"redact_patterns": ["token=\\S+", "(unclosed"]}})
    assert len(errors) == 1
    assert errors[0].path == "diagnose.redact_patterns"
    assert errors[0].message.startswith("pattern 1 ('(unclosed') is not a valid regex: ")


def test_an_allowlisted_unit_must_be_a_valid_unit_name() -> None:
    """A path in the allowlist is refused at the list entry, like in a plan."""
    errors = config_errors({"executor": {"allow": {"restart_unit": ["/etc/nginx"]}}})
    assert errors == [
        FieldError(
            path="executor.allow.restart_unit.0",
            message="unit name must not contain '/'; name a unit, not a path",
        )
    ]


def test_the_allowlist_only_knows_the_write_tools() -> None:
    """A tool name the executor does not have (``run_command``) is refused under
    ``executor.allow``."""
    errors = config_errors({"executor": {"allow": {"run_command": ["nginx.service"]}}})
    assert len(errors) == 1
    assert errors[0].path.startswith("executor.allow.run_command")
    assert "restart_unit" in errors[0].message


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"executor": {"step_timeout_seconds": 0}}, "executor.step_timeout_seconds"),
        ({"executor": {"approval_ttl_seconds": 8 * 86400}}, "executor.approval_ttl_seconds"),
        ({"diagnose": {"health": {"web": {"url": "ftp://host/"}}}}, "diagnose.health.web.url"),
    ],
)
def test_out_of_range_settings_are_named(data: dict[str, Any], path: str) -> None:
    """A zero step timeout, an approval valid for more than a week, a non-HTTP health
    URL: each is refused at its key."""
    assert [e.path for e in config_errors(data)] == [path]


def test_a_proxy_group_puts_the_page_on_its_unix_socket() -> None:
    """Where a reverse proxy is configured (``[web] proxy_group``), the page listens on the
    Unix socket only that group may connect to, without a word more; without one it stays
    on 127.0.0.1:8750; a proxy_group with ``listen = "tcp"`` is an error naming both."""
    proxied = OpsbotConfig.model_validate({"web": {"proxy_group": "www-data"}})
    assert (proxied.web.listen, proxied.web.proxy_group) == ("unix", "www-data")
    assert OpsbotConfig.model_validate({}).web.listen == "tcp"
    with pytest.raises(ValidationError) as caught:
        OpsbotConfig.model_validate({"web": {"proxy_group": "www-data", "listen": "tcp"}})
    assert 'with listen = "tcp" it does nothing' in str(caught.value)
