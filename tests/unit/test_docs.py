"""The docs hold together: every picture the README and docs show exists (`make screenshots`
draws them), every relative link points at a file that is there, and every `#anchor` at a
heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "bench" / "README.md",
        *ROOT.glob("docs/**/*.md"),
    ]
)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_IMG = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")


def _prose(page: Path) -> str:
    """The page without code (a link in a code block is an example) or comments."""
    text = _COMMENT.sub("", page.read_text(encoding="utf-8"))
    return _CODE.sub("", _FENCE.sub("", text))


def _links(page: Path) -> list[tuple[bool, str]]:
    """(is an image, target) of every link and image on the page."""
    text = _prose(page)
    found = [(bang == "!", target) for bang, target in _LINK.findall(text)]
    return found + [(True, src) for src in _IMG.findall(text)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def _local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target)


def test_there_are_pages() -> None:
    assert (ROOT / "README.md") in PAGES and len(PAGES) >= 8


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pictures_exist(page: Path) -> None:
    for image, target in _links(page):
        if not image or not _local(target):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_file(), f"{page.relative_to(ROOT)}: missing picture {target}"
        assert path.stat().st_size > 0, f"{target} is empty"
        if path.suffix == ".svg":
            assert "<svg" in path.read_text(encoding="utf-8")[:2000], f"{target} is not an SVG"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path) -> None:
    for _image, target in _links(page):
        if not _local(target):
            continue
        where, _, anchor = target.partition("#")
        path = (page.parent / where).resolve() if where else page
        assert path.exists(), f"{page.relative_to(ROOT)}: broken link {target}"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.relative_to(ROOT)}: no #{anchor} in {where}"


def test_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move detail to docs/"
    assert any(image for image, _ in _links(ROOT / "README.md")), "README.md shows no picture"


def test_every_screenshot_is_shown_somewhere() -> None:
    """A picture `make screenshots` draws that no page shows is a picture nobody keeps up."""
    shown = {
        (page.parent / target.split("#")[0]).resolve()
        for page in PAGES
        for image, target in _links(page)
        if image and _local(target)
    }
    drawn = sorted((ROOT / "docs" / "images").glob("*.svg"))
    assert drawn
    for picture in drawn:
        assert picture.resolve() in shown, f"{picture.name} is not shown on any page"
