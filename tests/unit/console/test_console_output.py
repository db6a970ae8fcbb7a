"""What an operator reads fits a terminal and says each thing once (issue 13, items 9 and
10): line breaks in a reason are spaces, not a literal ``\\x0a``; a diagnosis step's
finding breaks between words within 100 columns; the note is printed once, after the
steps; every verb speaks JSON for scripts; ``--version`` answers."""

from __future__ import annotations

import pytest

from opsbot_cli.diagnose import print_event
from opsbot_cli.main import COMMANDS, build_parser, main
from opsbot_cli.output import fit, one_line
from shared_schema.diagnose_socket import StepEvent


def step_event(action: str, summary: str, tool: str | None = None) -> StepEvent:
    return StepEvent(
        run_id="r1",
        step=2,
        decided_by="policy",
        action=action,  # type: ignore[arg-type]
        tool=tool,
        summary=summary,
        result_excerpt="",
        tokens=0,
        redactions=0,
    )


def test_a_reason_over_several_lines_reads_as_one() -> None:
    """systemctl's two-line error in a FAILED reason: one line, no escape codes for the
    line break; a real control character is still escaped."""
    said = one_line("Job for app.service failed.\nSee 'systemctl status app.service'.\x1b[31m")
    assert said == "Job for app.service failed. See 'systemctl status app.service'.\\x1b[31m"


def test_a_long_finding_breaks_between_words_within_100_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A step's long finding shows as two lines under the step's name, each within 100
    columns and broken between words, the cut marked with …; --verbose shows all of it."""
    words = " ".join(f"word{n}" for n in range(80))
    print_event(step_event("call_tool", words, tool="tail_journal"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "  step 2 [policy] tail_journal"
    assert all(len(line) <= 100 for line in lines)
    assert all(line.split()[-1].startswith("word") or line.endswith("…") for line in lines[1:])
    assert len(lines) == 3  # two lines of it; --verbose shows the rest
    print_event(step_event("call_tool", words, tool="tail_journal"), verbose=True)
    assert "word79" in capsys.readouterr().out


def test_the_note_is_not_printed_twice(capsys: pytest.CaptureFixture[str]) -> None:
    """The final_note step prints its name only: the note itself follows the steps."""
    print_event(step_event("final_note", "Could not read the state of app.service"))
    assert capsys.readouterr().out == "  step 2 [policy] final_note\n"


def test_fit_keeps_every_word_it_shows_whole() -> None:
    """Text cut to two indented lines within 100 columns ends with " …" where it was cut,
    never in the middle of a word."""
    lines = fit("alpha " * 40, "    ", lines=2)
    assert all(len(line) <= 100 and line.startswith("    ") for line in lines)
    assert lines[-1].endswith(" …")


def test_every_verb_takes_json() -> None:
    """Scripts read every verb: each has --json."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    missing = [
        name
        for name in (c.name for c in COMMANDS)
        if "--json" not in sub.choices[name]._option_string_actions  # type: ignore[attr-defined]
    ]
    assert missing == []


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`opsbot --version` prints opsbot's version and exits 0."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("opsbot ")
