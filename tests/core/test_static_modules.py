"""HAL's own ES modules stay small and their imports resolve, in static/ and once collected."""

from __future__ import annotations

import re
from pathlib import Path

from django.core.management import call_command

from tests.test_architecture import import_circles

STATIC = Path(__file__).resolve().parents[2] / "static"
TEMPLATES = STATIC.parent / "templates"
MAX_LINES = 500  # the house rule for every module (DESIGN.md); vendored files are not ours

IMPORT = re.compile(
    r"^\s*(?:import|export)\s+(?P<what>[^;]*?)\s*\bfrom\s*[\"'](?P<path>\.{1,2}/[^\"']+)[\"']",
    re.MULTILINE | re.DOTALL,
)
BARE_IMPORT = re.compile(r"^\s*import\s*[\"'](?P<path>\.{1,2}/[^\"']+)[\"']", re.MULTILINE)
DECLARED = re.compile(
    r"^export\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+(?P<name>[\w$]+)", re.MULTILINE
)
LISTED = re.compile(r"^export\s*\{(?P<names>[^}]*)\}", re.MULTILINE)


def own_modules(root: Path) -> list[Path]:
    """Every .js/.mjs under root except the vendored libraries."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in {".js", ".mjs"} and "vendor" not in p.relative_to(root).parts
    )


def exports_of(source: str) -> set[str]:
    """The names a module exports (declarations and `export { a, b as c }` lists)."""
    names = {m["name"] for m in DECLARED.finditer(source)}
    for m in LISTED.finditer(source):
        for item in m["names"].split(","):
            if item.strip():
                names.add(item.split(" as ")[-1].strip())
    if re.search(r"^export\s+default\b", source, re.MULTILINE):
        names.add("default")
    return names


def imported_names(what: str) -> set[str]:
    """The names an import clause takes from its module (`default` for a default import)."""
    names: set[str] = set()
    braced = re.search(r"\{([^}]*)\}", what)
    if braced:
        names |= {i.split(" as ")[0].strip() for i in braced[1].split(",") if i.strip()}
    head = what.split("{")[0].strip().rstrip(",").strip()
    if head and not head.startswith("*"):
        names.add("default")
    return names


def broken_imports(root: Path) -> list[str]:
    """Relative imports of root's own modules whose file is missing or lacks a named export."""
    problems = []
    for path in own_modules(root):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        found = [(m["what"], m["path"]) for m in IMPORT.finditer(source)]
        found += [("", m["path"]) for m in BARE_IMPORT.finditer(source)]
        for what, spec in found:
            target = (path.parent / spec).resolve()
            if not target.is_file():
                problems.append(f"{rel}: {spec} does not exist")
                continue
            if "vendor" in target.relative_to(root.resolve()).parts:
                continue  # minified libraries: their exports are not ours to parse
            missing = imported_names(what) - exports_of(target.read_text(encoding="utf-8"))
            if missing:
                problems.append(f"{rel}: {spec} does not export {sorted(missing)}")
    return problems


def import_graph(root: Path) -> dict[str, set[str]]:
    """root's own modules → the own modules each imports by relative path."""
    graph: dict[str, set[str]] = {}
    for path in own_modules(root):
        source = path.read_text(encoding="utf-8")
        specs = [m["path"] for m in IMPORT.finditer(source)]
        specs += [m["path"] for m in BARE_IMPORT.finditer(source)]
        targets = {(path.parent / spec).resolve() for spec in specs}
        graph[path.relative_to(root).as_posix()] = {
            t.relative_to(root.resolve()).as_posix()
            for t in targets
            if t.is_file() and "vendor" not in t.relative_to(root.resolve()).parts
        }
    return graph


def test_no_own_static_module_is_over_500_lines():
    sizes = {
        p.relative_to(STATIC).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in own_modules(STATIC)
    }
    assert sizes  # the walk found the modules
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, f"split these along their seams (limit {MAX_LINES} lines): {too_long}"


def test_every_relative_import_finds_its_file_and_names():
    assert broken_imports(STATIC) == []


def test_no_static_modules_import_round_a_circle():
    # As for the Python modules (tests/test_architecture.py): a module that needs a higher
    # one's function is handed it (panel_messages.onVersionChange), so each reads bottom up.
    graph = import_graph(STATIC)
    assert graph["hal/panel.js"] >= {"hal/panel_events.js", "hal/panel_state.js"}
    assert import_circles(graph) == []


def test_collected_static_files_keep_every_import_resolvable(tmp_path, settings):
    # Production serves collectstatic's output (deploy/install.py); the modules import
    # each other by relative path, so what the storage writes must still line up.
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "hal" / "panel.js").is_file()
    assert broken_imports(tmp_path) == []


def test_every_static_file_a_template_names_exists():
    named = {
        (t.relative_to(TEMPLATES).as_posix(), m[1])
        for t in TEMPLATES.rglob("*.html")
        for m in re.finditer(r"{%\s*static\s+'([^']+)'\s*%}", t.read_text(encoding="utf-8"))
    }
    assert named
    assert [(t, f) for t, f in sorted(named) if not (STATIC / f).is_file()] == []


def test_the_panel_preloads_every_part_it_imports():
    # Without the preload each level of imports costs the first page load a round trip.
    html = (TEMPLATES / "chatrooms" / "panel.html").read_text(encoding="utf-8")
    preloaded = set(
        re.findall(r"<link rel=\"modulepreload\" href=\"{% static '([^']+)' %}\">", html)
    )
    parts = {p.relative_to(STATIC).as_posix() for p in (STATIC / "hal").glob("panel_*.js")}
    assert parts and preloaded == parts


def test_the_import_check_sees_missing_files_and_names(tmp_path):
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "lib.mjs").write_text("export default 1;\n")
    (tmp_path / "a.js").write_text(
        "export function shown() {}\nexport const kept = 1;\n"
        "const x = 2;\nexport { x as renamed };\n"
    )
    (tmp_path / "b.js").write_text(
        'import lib from "./vendor/lib.mjs";\n'
        'import { shown, kept as k, renamed } from "./a.js";\n'
        'import {\n  gone,\n  shown as s,\n} from "./a.js";\n'
        'import "./missing.js";\n'
    )
    assert broken_imports(tmp_path) == [
        "b.js: ./a.js does not export ['gone']",
        "b.js: ./missing.js does not exist",
    ]
    assert [p.name for p in own_modules(tmp_path)] == ["a.js", "b.js"]
    (tmp_path / "a.js").write_text('import { x } from "./b.js";\nexport function shown() {}\n')
    assert import_circles(import_graph(tmp_path)) == [["a.js", "b.js"]]
