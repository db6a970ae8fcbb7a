"""A mistake in opsbot.toml is named by its file, line and key, as the operator wrote the
file: tomllib gives no positions, so the line is found in the text itself (tables, array
tables, dotted, quoted and inline keys; nothing inside a multi-line string or array is
taken for a key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared_io._config_lines import key_lines
from shared_io.config import load_config
from shared_io.errors import ConfigError


def refused(tmp_path: Path, text: str) -> str:
    """The message of the ConfigError the file ``text`` is refused with, its path as
    FILE."""
    path = tmp_path / "opsbot.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.message.replace(str(path), "FILE")


def test_a_misspelt_key_is_named_by_file_line_and_the_key_it_meant(tmp_path: Path) -> None:
    """alice types max_step for max_steps on line 12 of her config: the error says
    FILE:12, the key path, that the key is unknown, and which one she likely meant."""
    text = "# opsbot\n" * 3 + '[executor.allow]\nrestart_unit = ["app.service"]\n\n'
    text += '[diagnose]\nredact_patterns = [\n  "CUST-[0-9]+",\n  "x = 1",\n]\nmax_step = 3\n'
    assert text.splitlines()[11] == "max_step = 3"
    assert refused(tmp_path, text) == (
        "FILE:12: diagnose.max_step: unknown key (did you mean max_steps?)"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("diagnose.max_stepz = 3\n", "FILE:1: diagnose.max_stepz: unknown key"),
        (
            '[executor]\nallow = { restart_unitt = ["app.service"] }\n',
            "FILE:2: executor.allow.restart_unitt: Input should be 'restart_unit'",
        ),
        (
            '[[executor.apply_window]]\nstart = "Mon 02:00"\nduration = "1h"\n\n'
            '[[executor.apply_window]]\nstart = "Sat 10:00"\nduraton = "1h"\n',
            "FILE:5: executor.apply_window.1.duration: Field required; "
            "line 7: executor.apply_window.1.duraton: unknown key (did you mean duration?)",
        ),
        (
            '[executor.apply_window]\nstart = "Mon 02:00"\nduration = "1 fortnight"\n',
            "FILE:3: executor.apply_window.duration: '1 fortnight' is not a systemd timespan",
        ),
        (
            '[notify.channels.ops]\nkind = "ntfy"\nurl = "https://ntfy.example/x"\ntoken = 1\n',
            "FILE:4: notify.channels.ops.token: unknown key",
        ),
        (
            '[diagnose]\n"max_steps" = 0\n',
            "FILE:2: diagnose.max_steps: Input should be greater than or equal to 1",
        ),
        (
            '[diagnose.health.web]\nurl = """\nunit = 1\n"""\n',
            "FILE:2: diagnose.health.web.url: Input should be a valid URL",
        ),
        (
            '[diagnose.health.web]\nurl = "http://127.0.0.1/"\nunit = 7\n',
            "FILE:3: diagnose.health.web.unit: Input should be a valid string",
        ),
    ],
    ids=[
        "dotted key",
        "inline table",
        "second array table",
        "lone array table",
        "union member",
        "quoted key",
        "multi-line string",
        "sub-table",
    ],
)
def test_each_way_of_writing_a_key_is_found_on_its_line(
    tmp_path: Path, text: str, says: str
) -> None:
    """Whichever TOML form the key has, the error starts with the line it is on and the
    key path as written (no union tag, no index of a lone table)."""
    assert refused(tmp_path, text).startswith(says)


def test_lines_inside_strings_and_arrays_are_never_keys() -> None:
    """A ``key = value`` inside a multi-line string or array is text, not a key; the keys
    after them keep their own lines, and a table's prefixes are where it first appears."""
    text = (
        '[diagnose]\nsymptom = """\nmax_steps = 1\n"""\nwatch = [\n  "a.service",\n'
        '  ["b"],\n]\nmax_steps = 2\n[diagnose.health.web]\nurl = "x"\n'
    )
    lines = key_lines(text)
    assert lines[("diagnose", "max_steps")] == 9
    assert lines[("diagnose", "watch")] == 5
    assert ("b",) not in lines
    assert lines[("diagnose", "health")] == 10
    assert lines[("diagnose", "health", "web", "url")] == 11


def test_a_misspelt_table_is_named_by_its_header_line(tmp_path: Path) -> None:
    """[diagnoze] is an unknown key of the file itself: named by its header's line, with
    the table it likely meant."""
    assert refused(tmp_path, "[diagnoze]\nmax_steps = 3\n") == (
        "FILE:1: diagnoze: unknown key (did you mean diagnose?)"
    )
