"""The shell blocks of docs/deploy.md, extracted for the tests that run them as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def sections(text: str, first: int, last: int) -> list[str]:
    """The text of the sections `## first.` … `## last.`, in document order."""
    parts = re.split(r"^## (?=\d+\.)", text, flags=re.M)
    found = []
    for part in parts:
        number = re.match(r"(\d+)\.", part)
        if number and first <= int(number.group(1)) <= last:
            found.append(part)
    return found


def blocks(text: str) -> list[str]:
    """The ```sh blocks of `text`, in document order."""
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S)


def section_blocks(text: str, first: int, last: int) -> list[str]:
    """The ```sh blocks of the sections `## first.` … `## last.`, in document order."""
    return [block for part in sections(text, first, last) for block in blocks(part)]


def blocks_before(text: str, section: int, heading: str) -> list[str]:
    """The ```sh blocks of section `section` above its sub-heading `### heading`."""
    (part,) = sections(text, section, section)
    head, found, _ = part.partition(f"\n### {heading}\n")
    assert found, f"§{section} has no sub-heading {heading!r}"
    return blocks(head)


def blocks_under(text: str, section: int, heading: str) -> list[str]:
    """The ```sh blocks of section `section` below its sub-heading `### heading`."""
    (part,) = sections(text, section, section)
    _, found, tail = part.partition(f"\n### {heading}\n")
    assert found, f"§{section} has no sub-heading {heading!r}"
    return blocks(tail)


# §4's sub-heading whose blocks are for §6's `hal-web@` layout, not §2's single `hal-web`.
SIX_LAYOUT_ROLLBACK = "Rollback and restore on the §6 layout"


def single_process_blocks(text: str) -> list[str]:
    """§2–§4's blocks for the single `hal-web` (§4's §6-layout sub-section left out)."""
    return section_blocks(text, 2, 3) + blocks_before(text, 4, SIX_LAYOUT_ROLLBACK)


def doc_versions(found: list[str]) -> list[str]:
    """The versions the documented commands install, in order of first mention."""
    seen: list[str] = []
    for version in re.findall(r"hal-(\d+\.\d+\.\d+)\.tar\.gz", "\n".join(found)):
        if version not in seen:
            seen.append(version)
    return seen


def placeholders(found: list[str]) -> list[str]:
    """What the reader would have to fill in (`<name>`): such a command does not run."""
    return re.findall(r"<[a-z][^>]*>", "\n".join(found))
