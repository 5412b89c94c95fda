"""Build providers/data/unicode_security.json from the Unicode data files (UTS #39, UCD).

Usage: python scripts/build_unicode_security.py DIR
where DIR holds confusables.txt, Scripts.txt, ScriptExtensions.txt and
PropertyValueAliases.txt of one Unicode version (https://www.unicode.org/Public/).
The output keeps only what HAL's name check needs: the confusable prototype of each
source character and the script / script-extension ranges (ISO 15924 codes).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "providers" / "data" / "unicode_security.json"


def _lines(path: Path):
    for raw in path.read_text(encoding="utf-8-sig").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            yield [part.strip() for part in line.split(";")]


def _header(path: Path, key: str) -> str:
    for raw in path.read_text(encoding="utf-8-sig").splitlines()[:12]:
        match = re.match(rf"#\s*{key}:\s*(.+)", raw)
        if match:
            return match.group(1).strip()
    return ""


def _range(field: str) -> tuple[int, int]:
    start, _, end = field.partition("..")
    return int(start, 16), int(end or start, 16)


def _ranges(rows) -> list[list]:
    """Sorted [start, end, value] rows with adjacent equal values merged."""
    merged: list[list] = []
    for start, end, value in sorted(rows):
        if merged and merged[-1][2] == value and merged[-1][1] + 1 == start:
            merged[-1][1] = end
        else:
            merged.append([start, end, value])
    return merged


def build(src: Path) -> dict:
    confusables = src / "confusables.txt"
    short = {
        fields[2]: fields[1]
        for fields in _lines(src / "PropertyValueAliases.txt")
        if fields[0] == "sc"
    }
    prototypes = {}
    for fields in _lines(confusables):
        source = chr(int(fields[0], 16))
        prototypes[source] = "".join(chr(int(cp, 16)) for cp in fields[1].split())
    scripts = [(*_range(f[0]), short.get(f[1], f[1])) for f in _lines(src / "Scripts.txt")]
    extensions = [(*_range(f[0]), f[1]) for f in _lines(src / "ScriptExtensions.txt")]
    return {
        "source": "Unicode UTS #39 confusables.txt and UCD Scripts/ScriptExtensions",
        "version": _header(confusables, "Version"),
        "date": _header(confusables, "Date"),
        "confusables": prototypes,
        "scripts": _ranges(scripts),
        "script_extensions": _ranges(extensions),
    }


def main() -> None:
    data = build(Path(sys.argv[1]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    print(f"{OUT}: Unicode {data['version']}, {len(data['confusables'])} confusables")


if __name__ == "__main__":
    main()
