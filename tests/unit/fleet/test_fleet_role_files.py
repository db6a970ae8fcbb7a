"""The Ansible role opsbot.fleet.opsbot installs a host from the wheel alone: the wheel must
carry every unit and file ``install.sh --no-pip`` uses, the role must enable what README.md's
install enables, and the config it renders from inventory variables must be one opsbot reads.

The wheel's data files are read with setuptools' own expansion of pyproject.toml's
``[tool.setuptools.data-files]`` (what ``pip wheel`` puts under ``<venv>/share/opsbot/``),
not by building a wheel: a unit added to units/ and not to data-files fails here."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from pydantic import ValidationError
from setuptools.config.expand import canonic_data_files

from shared_schema import OpsbotConfig
from shared_schema.standing import ApproveRule
from testbed.readme import OPERATING, block, commands, enabled_units
from testbed.stack import DEFAULT_STACK, HEALTH_TIMEOUT, Stack

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "packaging/ansible/ansible_collections/opsbot/fleet/roles/opsbot"
INSTALL_SH = REPO / "packaging/install.sh"
SHARE = "share/opsbot"
#: Files in units/ that are not for hosts: the `systemd-analyze security` scores the
#: hardening test compares against.
NOT_FOR_HOSTS = {"units/security-scores.json"}


def wheel_data_files() -> dict[str, str]:
    """Each file the wheel installs under <venv>/share/opsbot: checkout path -> destination."""
    document = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    spec = document["tool"]["setuptools"]["data-files"]
    return {
        source: f"{directory}/{Path(source).name}"
        for directory, sources in canonic_data_files(spec, str(REPO))
        for source in sources
    }


def test_wheel_carries_every_file_in_units() -> None:
    """Every file in units/ (a new unit type too) goes into the wheel, at its own path
    under share/opsbot, so install.sh --no-pip finds it where it finds it in a checkout."""
    in_units = {
        str(path.relative_to(REPO)) for path in (REPO / "units").rglob("*") if path.is_file()
    }
    carried = wheel_data_files()
    assert sorted(in_units - NOT_FOR_HOSTS) == sorted(s for s in carried if s.startswith("units/"))
    for source, destination in carried.items():
        assert destination == f"{SHARE}/{source}"


def test_wheel_carries_every_file_install_sh_takes_from_the_checkout() -> None:
    """Each "$src/..." path install.sh reads (outside the pip step) is in the wheel: the
    copy of install.sh the wheel installs resolves $src to <venv>/share/opsbot."""
    text = INSTALL_SH.read_text(encoding="utf-8")
    used = re.findall(r'"\$src"?/([^" ]+)"?', text)
    assert len(used) >= 8, used
    carried = set(wheel_data_files())
    for pattern in used:
        matches = glob.glob(pattern.replace("$unit", "*"), root_dir=REPO)
        assert matches, f"install.sh uses $src/{pattern}, which matches nothing"
        assert set(matches) <= carried, f"$src/{pattern} is not all in the wheel"


def test_install_sh_help_shows_the_whole_header_with_no_pip() -> None:
    """`install.sh --help` prints the header comment to its last line, --no-pip among its
    options (the sed range in --help moves whenever a line is added)."""
    proc = subprocess.run(
        ["bash", str(INSTALL_SH), "--help"], capture_output=True, text=True, check=True
    )
    lines = INSTALL_SH.read_text(encoding="utf-8").splitlines()[1:]  # after the #! line
    header = lines[: next(i for i, line in enumerate(lines) if not line.startswith("#"))]
    assert proc.stdout.splitlines() == header
    assert "--no-pip" in proc.stdout.splitlines()[1]
    assert any(line.startswith("# --no-pip: ") for line in header)


def role_defaults() -> dict[str, Any]:
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text(encoding="utf-8"))
    assert isinstance(defaults, dict)
    return defaults


def test_role_enables_the_units_readme_install_enables() -> None:
    """The role enables exactly what README.md's install block's `systemctl enable --now`
    names, in its order."""
    readme = enabled_units(commands(block("install-commands")))
    assert readme
    assert role_defaults()["opsbot_enabled_units"] == readme


def stack_variables(stack: Stack) -> dict[str, Any]:
    """The role variables for a host running the scenario stack (what the fleet test gives
    each host): testbed/stack.py Stack.opsbot_config as inventory data."""
    return {
        "opsbot_executor": {
            "restart_budget": 100,
            "max_waiting_plans_per_submitter": 1000,
            "max_waiting_plans": 5000,
        },
        "opsbot_allow": {
            tool: list(stack.units)
            for tool in ("restart_unit", "start_unit", "reload_unit", "reset_failed_unit")
        },
        "opsbot_health": {
            name: {"url": url, "unit": unit, "timeout_seconds": HEALTH_TIMEOUT}
            for name, (url, unit) in stack.health.items()
        },
    }


def ansible_bool(value: Any) -> bool:
    """Ansible's ``bool`` filter: true for True, 1 and the strings yes, on, 1, true."""
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true")
    return value is True or value == 1


def render_config(variables: dict[str, Any]) -> str:
    """templates/opsbot.toml.j2 as Ansible's template module renders it (trim_blocks;
    ``to_json`` is Ansible's json.dumps, ``bool`` its truth of a variable), over the
    role's defaults."""
    environment = jinja2.Environment(
        trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    environment.filters["to_json"] = json.dumps
    environment.filters["bool"] = ansible_bool
    template = environment.from_string((ROLE / "templates/opsbot.toml.j2").read_text())
    return template.render(**{**role_defaults(), **variables})


def test_rendered_config_for_the_stack_is_the_stacks_config() -> None:
    """From the stack's variables the role writes a config opsbot reads as the very config
    the scenario tests install (testbed/stack.py), key for key."""
    stack = DEFAULT_STACK
    rendered = OpsbotConfig.model_validate(tomllib.loads(render_config(stack_variables(stack))))
    assert rendered == OpsbotConfig.model_validate(tomllib.loads(stack.opsbot_config()))


def test_rendered_config_carries_every_variable() -> None:
    """Watch, scope, executor scalars, the model and the raw extra all reach the config."""
    variables = {
        **stack_variables(DEFAULT_STACK),
        "opsbot_watch": ["app.service", "db.service"],
        "opsbot_scope": ["db.service"],
        "opsbot_executor": {"settle_seconds": 5, "approval_ttl_seconds": 600},
        "opsbot_model": {
            "kind": "openai",
            "api_url": "http://127.0.0.1:8000/v1",
            "model": "qwen",
        },
        "opsbot_config_extra": '[[executor.apply_window]]\nstart = "*-*-* 02:00"\n'
        'duration = "1h"\n',
    }
    config = OpsbotConfig.model_validate(tomllib.loads(render_config(variables)))
    assert config.diagnose.watch == ["app.service", "db.service"]
    assert config.diagnose.scope == ["db.service"]
    assert (config.executor.settle_seconds, config.executor.approval_ttl_seconds) == (5, 600)
    assert config.diagnose.model.kind == "openai"
    assert str(config.diagnose.model.api_url) == "http://127.0.0.1:8000/v1"
    assert config.diagnose.model.model == "qwen"
    assert [w.start for w in config.executor.apply_window] == ["*-*-* 02:00"]
    assert set(config.executor.allow) == set(variables["opsbot_allow"])


def test_rendered_config_with_defaults_only_is_opsbots_defaults() -> None:
    """A host given no opsbot_* variables gets the defaults: opsbot may touch nothing."""
    assert OpsbotConfig.model_validate(tomllib.loads(render_config({}))) == OpsbotConfig()


NIGHT_RESTARTS = {
    "name": "night-restarts",
    "tools": ["restart_unit", "start_unit"],
    "units": ["app.service", "worker@*.service"],
    "windows": [
        {"start": "*-*-* 00:00", "duration": "6h"},
        {"start": "Sat,Sun *-*-* 10:00", "duration": "2h"},
    ],
    "max_per_unit": 2,
    "period": "12h",
}


def rendered_rules(**variables: Any) -> list[ApproveRule]:
    """The ``[[approve.rule]]`` tables of the config the role renders, as opsbot reads them."""
    config = OpsbotConfig.model_validate(tomllib.loads(render_config(variables)))
    return config.approve.rule


def test_rules_render_as_the_rules_opsbot_reads() -> None:
    """opsbot_approve_rules become [[approve.rule]] tables (windows as their own
    [[approve.rule.windows]]) that opsbot's schema reads as exactly the rules given, in
    their order; without any, the config has none."""
    short = {"name": "resets", "tools": ["reset_failed_unit"], "units": ["db.service"]}
    rules = rendered_rules(opsbot_approve_rules=[NIGHT_RESTARTS, short])
    assert rules == [
        ApproveRule.model_validate({**NIGHT_RESTARTS, "mode": "shadow"}),
        ApproveRule.model_validate({**short, "mode": "shadow"}),
    ]
    assert [w.seconds for w in rules[0].windows] == [6 * 3600, 2 * 3600]
    assert "[[approve.rule]]" not in render_config({})


@pytest.mark.parametrize(
    ("mode", "enforce", "written"),
    [
        (None, False, "shadow"),
        (None, True, "shadow"),
        ("shadow", True, "shadow"),
        ("enforce", False, "shadow"),
        ("enforce", "no", "shadow"),
        ("enforce", True, "enforce"),
        ("enforce", "true", "enforce"),
    ],
)
def test_a_rule_enforces_only_with_the_switch(mode: str | None, enforce: Any, written: str) -> None:
    """Shadow first: a rule is written as shadow unless its mode is enforce and the host's
    opsbot_approve_enforce is true (as Ansible reads a variable), both."""
    rule = NIGHT_RESTARTS if mode is None else {**NIGHT_RESTARTS, "mode": mode}
    rules = rendered_rules(opsbot_approve_rules=[rule], opsbot_approve_enforce=enforce)
    assert [r.mode for r in rules] == [written]


@pytest.mark.parametrize(
    "rule",
    [
        {**NIGHT_RESTARTS, "mode": "enforced"},
        {**NIGHT_RESTARTS, "tools": ["*"]},
        {**NIGHT_RESTARTS, "units": ["*"]},
        {**NIGHT_RESTARTS, "cause": ["killed"]},
        {key: value for key, value in NIGHT_RESTARTS.items() if key != "tools"},
    ],
)
def test_a_rule_opsbot_would_refuse_is_not_made_valid(rule: dict[str, Any]) -> None:
    """The template passes a rule on as given (a mistyped mode is not made shadow, a key
    opsbot does not know is not dropped, no tool or unit is filled in), so that opsbot's
    loader, the template task's validate, refuses it and nothing is written."""
    text = render_config({"opsbot_approve_rules": [rule], "opsbot_approve_enforce": True})
    with pytest.raises(ValidationError):
        OpsbotConfig.model_validate(tomllib.loads(text))


def test_the_manuals_fleet_rule_is_its_rule_shadow_first() -> None:
    """docs/operating.md's fleet rule (<!-- fleet-rules -->, mode enforce), through the role
    without the switch, is exactly the manual's own rule in shadow (<!-- standing-rule -->);
    with opsbot_approve_enforce it is that rule in enforce."""
    variables = yaml.safe_load(block("fleet-rules", doc=OPERATING))
    (manual,) = OpsbotConfig.model_validate(
        tomllib.loads(block("standing-rule", doc=OPERATING))
    ).approve.rule
    assert manual.mode == "shadow"
    assert rendered_rules(**variables) == [manual]
    enforced = rendered_rules(**variables, opsbot_approve_enforce=True)
    assert enforced == [manual.model_copy(update={"mode": "enforce"})]


@pytest.mark.parametrize("name", ["opsbot", "journal"])
def test_every_default_is_in_the_argument_spec(name: str) -> None:
    """Each variable a role's defaults/main.yml sets is documented in meta/main.yml's
    argument_specs, and the other way round (but for the required opsbot_wheelhouse)."""
    role = ROLE.parent / name
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text(encoding="utf-8"))
    meta = yaml.safe_load((role / "meta/main.yml").read_text(encoding="utf-8"))
    options = meta["argument_specs"]["main"]["options"]
    required = {key for key, option in options.items() if option.get("required")}
    assert set(defaults) == set(options) - required
