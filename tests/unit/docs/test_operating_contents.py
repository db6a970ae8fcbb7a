"""docs/operating.md is long: its Contents list every section and subsection, in order,
so that a reader finds one from the top, and the third hour has a short path (rules,
agents, the audit, notifications) that links each section it needs."""

from __future__ import annotations

import re

from testbed.readme import OPERATING
from tests.unit.docs.test_docs_links import prose_lines, slug

THIRD_HOUR = "The third hour: rules, agents, the audit, notifications"
#: What the third hour's path links: rules, MCP, the audit, notifications.
THIRD_HOUR_LINKS = {
    "standing-approvals",
    "agent-clients-mcp",
    "who-approves-who-reads-the-audit",
    "checking-the-trail-opsbot-audit---verify",
    "approving-from-your-phone",
}


def sections() -> list[tuple[int, str]]:
    """(level, heading) of every ## and ### of the manual, but Contents itself."""
    found = []
    for _, line in prose_lines(OPERATING.read_text(encoding="utf-8")):
        heading = re.match(r"^(##|###) (.+)$", line)
        if heading and heading[2] != "Contents":
            found.append((len(heading[1]), heading[2]))
    return found


def part(title: str) -> str:
    """The text of section ``title``, up to the next ## heading."""
    text = OPERATING.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_the_contents_list_every_section_in_order() -> None:
    """Each ## of the manual is a top entry of Contents, each ### one indented under it,
    in the manual's order, each linking its heading's anchor."""
    listed = re.findall(r"^( *)- \[.*\]\(#([^)]+)\)$", part("Contents"), flags=re.MULTILINE)
    wanted = [("  " * (level - 2), slug(title)) for level, title in sections()]
    assert listed == wanted


def test_the_third_hour_is_a_short_path_linking_what_it_needs() -> None:
    """Right after the Contents, the third hour is a few numbered steps (rules, MCP, the
    audit, notifications) that link each section they need and name the command to run."""
    assert sections()[0] == (2, THIRD_HOUR)
    path = part(THIRD_HOUR)
    assert len(path.strip().splitlines()) <= 25
    assert set(re.findall(r"\]\(#([^)]+)\)", path)) == THIRD_HOUR_LINKS
    steps = re.findall(r"^\d\. \*\*(.+?)\*\*", path, flags=re.MULTILINE)
    assert len(steps) == 4, steps
    for command in (
        "opsbot policy report",
        "opsbot mcp --check",
        "opsbot audit",
        "opsbot notify test",
    ):
        assert command in path, command
