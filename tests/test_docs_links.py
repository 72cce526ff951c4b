"""The documentation's links hold: every relative link and image in ``README.md`` and ``docs/*.md``
names a file of the repository, every ``#anchor`` names a heading of the page it points to, every
page of ``docs/`` is linked from the README, and every screenshot PNG is shown in the README.

Anchors are GitHub's: the heading's text, lower-cased, with everything but letters, digits, ``_``,
``-`` and spaces dropped and each space made a ``-``; a repeated heading gets ``-1``, ``-2`` ...
(github-slugger, which github.com uses for Markdown headings).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the Markdown headings of ``text``."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(text: str) -> list[str]:
    """Every link and image target in ``text``'s prose (code blocks and code spans are not links)."""
    return _LINK.findall("\n".join(_CODE_SPAN.sub("", line) for line in _prose(text)))


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that name no file, or a heading its target does not have;
    each as ``target: why``. Links with a scheme (``https:``, ``mailto:``) are not checked."""
    bad: list[str] = []
    for target in links(page.read_text(encoding="utf-8")):
        if _SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            bad.append(f"{target}: {dest.name} has no heading #{anchor}")
        elif anchor and dest.suffix != ".md":
            bad.append(f"{target}: an anchor into a file that is not Markdown")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = {(ROOT / t.partition("#")[0]).resolve() for t in links((ROOT / "README.md").read_text()) if t}
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert len(docs) >= 4  # a glob that matched nothing would make this vacuous
    assert [p.name for p in docs if p.resolve() not in readme] == []


def test_every_screenshot_is_shown_in_the_readme() -> None:
    shown = {(ROOT / t).resolve() for t in links((ROOT / "README.md").read_text()) if t.endswith(".png")}
    pngs = sorted((ROOT / "screenshots").glob("*.png"))
    assert len(pngs) >= 6
    assert [p.name for p in pngs if p.resolve() not in shown] == []
    assert all(p.exists() for p in shown)


def test_the_checker_finds_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A page\n\n## Its `second` heading\n\n## A page\n")
    (tmp_path / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n"
        "[fine](there.md) [fine](there.md#its-second-heading) [fine](there.md#a-page-1) ![fine](shot.png)\n"
        "[fine](#title) [outside](https://example.com/nothing.md) `[in code](gone.md)` [two\nlines](gone2.md)\n"
        "```\n[in a block](gone.md)\n```\n"
        "[gone](gone.md) ![missing screenshot](missing.png) [no heading](there.md#nowhere) [self](#nowhere)\n")
    assert broken_links(page) == ["gone2.md: no such file", "gone.md: no such file", "missing.png: no such file",
                                  "there.md#nowhere: there.md has no heading #nowhere",
                                  "#nowhere: page.md has no heading #nowhere"]
