"""Fill empty or fuzzy Korean msgstr entries of locale/ko django.po from scripts/ko_glossary.tsv.

Run after `manage.py makemessages -l ko ...`; then `manage.py compilemessages -l ko`.
The .po stays the source of truth: a checked (non-fuzzy) translation is never overwritten.

    .venv/bin/python scripts/fill_ko.py            # fill, then list what is still missing
    .venv/bin/python scripts/fill_ko.py --check    # only list; exit 1 if anything is missing
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PO = HERE.parent / "locale/ko/LC_MESSAGES/django.po"
GLOSSARY_TSV = HERE / "ko_glossary.tsv"
CONTEXT_SEP = "\x04"  # gettext's separator between msgctxt and msgid


def load_glossary(path: Path = GLOSSARY_TSV) -> dict[str, str]:
    """Read the glossary TSV (msgctxt, msgid, msgstr) into {"ctx\\x04id" or "id": msgstr}."""
    glossary: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        ctx, msgid, msgstr = line.split("\t")
        glossary[f"{ctx}{CONTEXT_SEP}{msgid}" if ctx else msgid] = msgstr
    return glossary


@dataclass
class Entry:
    """One catalog entry: comment lines, flags and the (context, id, translation) strings."""

    comments: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    msgctxt: str | None = None
    msgid: str = ""
    msgid_plural: str | None = None
    msgstr: str = ""
    obsolete: bool = False

    @property
    def key(self) -> str:
        """The lookup key: "context\\x04id" when there is a context (as gettext does)."""
        return f"{self.msgctxt}{CONTEXT_SEP}{self.msgid}" if self.msgctxt else self.msgid

    @property
    def fuzzy(self) -> bool:
        """True when the entry carries the fuzzy flag (msgfmt skips it)."""
        return "fuzzy" in self.flags


def _unquote(text: str) -> str:
    body = text.strip()[1:-1]
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(escapes.get(body[i + 1], body[i + 1]))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _quote(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\r", "\\r")
    )
    if "\n" in escaped.rstrip("\n") or len(escaped) > 70:
        parts = escaped.replace("\n", "\\n\n").split("\n")
        return '""\n' + "\n".join(f'"{p}"' for p in parts if p)
    return '"' + escaped.replace("\n", "\\n") + '"'


def parse(text: str) -> list[Entry]:
    """Parse a .po file into entries (obsolete `#~` entries are kept as comments only)."""
    entries: list[Entry] = []
    for block in text.strip("\n").split("\n\n"):
        entry = Entry()
        current: str | None = None
        values: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith("#~"):
                entry.obsolete = True
                entry.comments.append(line)
            elif line.startswith("#,"):
                entry.flags = [f.strip() for f in line[2:].split(",") if f.strip()]
            elif line.startswith("#"):
                entry.comments.append(line)
            elif line.startswith('"'):
                if current is not None:
                    values[current] += _unquote(line)
            else:
                name, _, rest = line.partition(" ")
                current = name
                values[name] = _unquote(rest)
        entry.msgctxt = values.get("msgctxt")
        entry.msgid = values.get("msgid", "")
        entry.msgid_plural = values.get("msgid_plural")
        entry.msgstr = values.get("msgstr", values.get("msgstr[0]", ""))
        entries.append(entry)
    return entries


def serialize(entries: list[Entry]) -> str:
    """Write entries back in .po syntax."""
    blocks = []
    for e in entries:
        if e.obsolete:
            blocks.append("\n".join(e.comments))
            continue
        lines = [c for c in e.comments if not c.startswith("#|")] if not e.fuzzy else e.comments
        lines = list(lines)
        if e.flags:
            lines.append("#, " + ", ".join(e.flags))
        if e.msgctxt is not None:
            lines.append(f"msgctxt {_quote(e.msgctxt)}")
        lines.append(f"msgid {_quote(e.msgid)}")
        if e.msgid_plural is not None:
            lines.append(f"msgid_plural {_quote(e.msgid_plural)}")
            lines.append(f"msgstr[0] {_quote(e.msgstr)}")
        else:
            lines.append(f"msgstr {_quote(e.msgstr)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def missing(entries: list[Entry]) -> list[Entry]:
    """Non-header, non-obsolete entries that are empty or fuzzy."""
    return [e for e in entries if e.msgid and not e.obsolete and (not e.msgstr or e.fuzzy)]


def fill(entries: list[Entry], glossary: dict[str, str]) -> int:
    """Fill empty/fuzzy entries found in the glossary; clean the header; return how many."""
    count = 0
    for e in entries:
        if e.obsolete:
            continue
        if not e.msgid:  # the header: a real catalog, not a fuzzy template
            e.flags = [f for f in e.flags if f != "fuzzy"]
            e.msgstr = e.msgstr.replace("Language: \n", "Language: ko\n").replace(
                "charset=CHARSET", "charset=UTF-8"
            )
            continue
        if (not e.msgstr or e.fuzzy) and e.key in glossary:
            e.msgstr = glossary[e.key]
            e.flags = [f for f in e.flags if f != "fuzzy"]
            count += 1
    return count


def main() -> int:
    """Command line: fill (default) or --check; print what is still missing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("po", nargs="?", type=Path, default=DEFAULT_PO)
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if missing")
    args = parser.parse_args()
    entries = parse(args.po.read_text(encoding="utf-8"))
    if not args.check:
        n = fill(entries, load_glossary())
        args.po.write_text(serialize(entries), encoding="utf-8")
        print(f"filled {n} entries in {args.po}")
    left = missing(entries)
    for e in left:
        label = "fuzzy" if e.fuzzy else "empty"
        ctx = f" [{e.msgctxt}]" if e.msgctxt else ""
        print(f"{label}{ctx}: {e.msgid!r}")
    print(f"{len(left)} entries missing")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
