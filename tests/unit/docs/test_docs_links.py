"""The docs by reader (STYLE.md 19): README.md stays the ten-minute path (at most 250
lines), links every file in docs/, and no relative link in README.md or docs/ leads
nowhere: each names a file that exists and, with ``#anchor``, a heading that exists
there (GitHub's slugs). The checker is first shown broken links in a synthetic document,
so it cannot pass by seeing nothing."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 250

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of ``text`` outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (a link's words, code without its
    backticks) in lower case, without punctuation, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a Markdown document: its headings' slugs, a repeated slug numbered
    from -1 as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(text):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link to a file of this repository (not a URL, not
    inside code)."""
    links = []
    for number, line in prose_lines(text):
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            target = match.group(1)
            if target and not _EXTERNAL.match(target):
                links.append((number, target))
    return links


def broken_links(doc: Path, text: str) -> list[str]:
    """Each relative link of ``doc`` (whose content is ``text``) that names a file that
    does not exist, or an anchor its file has no heading for."""
    broken = []
    for number, target in relative_links(text):
        path_part, _, anchor = target.partition("#")
        where = f"{doc.name}:{number}: {target}"
        if path_part:
            path = (doc.parent / unquote(path_part)).resolve()
            if not path.exists():
                broken.append(f"{where}: no such file")
                continue
            if not anchor:
                continue
            if path.is_dir() or path.suffix != ".md":
                broken.append(f"{where}: an anchor into a file that is not Markdown")
                continue
            target_text = path.read_text(encoding="utf-8")
        else:
            target_text = text  # an anchor in this document
        if unquote(anchor) not in anchors(target_text):
            broken.append(f"{where}: no heading for #{anchor}")
    return broken


SYNTHETIC = ROOT / "docs" / "synthetic.md"
_HEADINGS = """# Title

## Did the fix work? VERIFIED or UNRESOLVED

## `opsbot approve`, and only once

## Notes

## Notes
"""


@pytest.mark.parametrize(
    ("link", "why"),
    [
        ("[gone](missing.md)", "no such file"),
        ("[gone](../nowhere/README.md#top)", "no such file"),
        ("[no heading](operating.md#no-such-heading)", "no heading for #no-such-heading"),
        ("[no heading](#not-here)", "no heading for #not-here"),
        ("[case kept](#Notes)", "no heading for #Notes"),
        ("[a hyphen too many](#did-the-fix-work-verified-or-unresolved-)", "no heading for"),
        ("[third notes](#notes-2)", "no heading for #notes-2"),
        ("see ![a picture](img/none.png)", "no such file"),
        ("[into code](../pyproject.toml#build-system)", "not Markdown"),
    ],
)
def test_the_checker_flags_a_broken_link(link: str, why: str) -> None:
    """A link to a missing file, to a heading its file does not have (in another doc or
    the same one, a repeated heading past its count), or an anchor into a file that has no
    headings: each is reported, with its line."""
    text = _HEADINGS + f"\nA paragraph with {link} in it.\n"
    found = broken_links(SYNTHETIC, text)
    assert len(found) == 1, found
    assert found[0].startswith("synthetic.md:11: ") and why in found[0]


def test_the_checker_passes_good_links_and_ignores_code_and_urls() -> None:
    """Links to files and headings that exist (GitHub's slugs: punctuation dropped, code
    unquoted, repeats numbered) pass; URLs, links in code spans and in fenced blocks (where
    ``#`` lines are comments, not headings) are not followed."""
    text = (
        _HEADINGS
        + "\n[a](#did-the-fix-work-verified-or-unresolved) [b](#opsbot-approve-and-only-once)"
        + " [c](#notes) [d](#notes-1) [e](operating.md#the-config-file) [f](../README.md)"
        + " [g](../fuzz/README.md) [h](https://example.com/x.md) [i](mailto:a@example.com)"
        + " `[j](nowhere.md)`\n\n```sh\n# Nowhere\n[k](nowhere.md)\n```\n"
        + "[l](#nowhere)\n"
    )
    assert broken_links(SYNTHETIC, text) == ["synthetic.md:17: #nowhere: no heading for #nowhere"]
    assert "nowhere" not in anchors(text)


def test_the_readme_is_the_ten_minute_path() -> None:
    """README.md has at most 250 lines: the rest of what a reader needs is in docs/."""
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move some into docs/"


def test_every_doc_is_linked_from_the_readme() -> None:
    """Each docs/*.md file is the target of a link in README.md."""
    assert DOCS, "no docs/*.md"
    linked = {
        (ROOT / unquote(target.partition("#")[0])).resolve()
        for _, target in relative_links(README.read_text(encoding="utf-8"))
    }
    assert [doc.name for doc in DOCS if doc.resolve() not in linked] == []


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda doc: doc.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(doc: Path) -> None:
    """Every relative link in README.md and docs/*.md names a file that exists and, with
    an anchor, a heading of that file."""
    text = doc.read_text(encoding="utf-8")
    assert relative_links(text) or doc != README, "README.md links nothing"
    assert broken_links(doc, text) == []
