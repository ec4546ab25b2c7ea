"""Citations of the docs resolve: every `docs/<file>.md#<anchor>` in the code, the bundle, the
Makefile and the docs names a file that exists and a heading of it that slugs to the anchor (as
GitHub renders it), and so does every relative link `(file.md#anchor)` between the docs. The
README stays a quick start (at most 10,000 bytes) that links every file under docs/."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 10_000

#: `docs/operations.md#exit-codes` wherever it is written (code, YAML, Markdown).
_CITATION = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(?:#([\w-]+))?")
#: A Markdown link's target relative to the linking file: `(operations.md#exit-codes)`,
#: `(#tables-added-later)`.
_LINK = re.compile(r"\]\(([^)\s#]*\.md|)(?:#([^)\s]+))?\)")
_FENCE = re.compile(r"^(```|~~~)")


def _sources() -> list[Path]:
    """The files that may cite the docs."""
    found = [ROOT / "bundle.yml", ROOT / "Makefile", README, *DOCS.glob("*.md")]
    for folder, pattern in (
        ("src", "*.py"),
        ("tests", "*.py"),
        ("bench", "*.py"),
        ("bench", "*.md"),
    ):
        found.extend((ROOT / folder).rglob(pattern))
    found.extend((ROOT / "resources").rglob("*.yml"))
    return sorted(p for p in found if p.is_file() and "egg-info" not in p.parts[-2])


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: markup dropped, lowercase, punctuation other than `-` and
    `_` dropped, spaces as `-`; a repeated slug gets `-1`, `-2`, ..."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
    count = seen.get(text)
    seen[text] = 0 if count is None else count + 1
    return text if count is None else f"{text}-{count + 1}"


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file's headings (fenced code blocks hold none)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.add(slug(m.group(1), seen))
    return frozenset(found)


def _problem(source: Path, line_no: int, target: Path, anchor: str | None) -> str | None:
    where = f"{source.relative_to(ROOT)}:{line_no}"
    name = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
    if not target.is_file():
        return f"{where}: {name} does not exist"
    if anchor and anchor not in anchors(target):
        return f"{where}: {name} has no heading whose anchor is #{anchor}"
    return None


def _citations() -> list[tuple[Path, int, Path, str | None]]:
    found = []
    for source in _sources():
        for line_no, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for m in _CITATION.finditer(line):
                found.append((source, line_no, DOCS / m.group(1), m.group(2)))
            if source.suffix == ".md" and (source == README or source.parent == DOCS):
                for m in _LINK.finditer(line):
                    file, anchor = m.group(1), m.group(2)
                    if "://" in file or file.startswith("docs/"):
                        continue  # web links; `docs/...` is checked above
                    found.append(
                        (source, line_no, (source.parent / file) if file else source, anchor)
                    )
    return found


def test_slugs_follow_github() -> None:
    seen: dict[str, int] = {}
    assert slug("Exit codes", seen) == "exit-codes"
    assert (
        slug("Column rules: keep PII out of the lake", seen)
        == "column-rules-keep-pii-out-of-the-lake"
    )
    assert slug("What `make setup` installs", seen) == "what-make-setup-installs"
    assert slug("History: SCD type 2 silver", seen) == "history-scd-type-2-silver"
    assert slug("Exit codes", seen) == "exit-codes-1"
    assert slug("Exit codes", seen) == "exit-codes-2"
    assert slug("binlake.model", seen) == "binlakemodel"


def test_citations_name_a_file_and_a_heading() -> None:
    citations = _citations()
    assert any(anchor for *_, anchor in citations), "no citation found: is the pattern right?"
    problems = [p for c in citations if (p := _problem(*c))]
    assert not problems, "\n".join(problems)


def test_the_code_cites_the_docs_not_readme_sections() -> None:
    """Sections moved to docs/: code cites `docs/<file>.md#<anchor>`, not the README's."""
    stale = re.compile(r"README(?:'s|,)\s*(?:\"|table|type|section|\")")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _sources()
        if p.suffix != ".md" and p != Path(__file__).resolve()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if stale.search(line) or "see the README" in line
    ]
    assert not found, found


def test_readme_is_a_quick_start() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, (
        f"README.md is {size} bytes, over {README_LIMIT}: move reference to docs/"
    )


@pytest.mark.parametrize("doc", sorted(p.name for p in DOCS.glob("*.md")))
def test_readme_links_every_doc(doc: str) -> None:
    assert f"(docs/{doc}" in README.read_text(encoding="utf-8"), (
        f"README.md does not link docs/{doc}"
    )
