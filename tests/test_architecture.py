"""Import directions: a lower app never imports a higher one (see docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Bottom to top. An app may import its own modules and those of the apps below it.
LAYERS = {
    "hal": 0,
    "vault": 1,
    "providers": 2,
    "webfetch": 3,
    "runbooks": 4,
    "chatrooms": 5,
    "reviews": 6,
    "investigations": 6,
    "notifications": 7,
    "alerts": 7,
}

# The ASGI/URL wiring and the settings put every app together: they may import any app.
WIRING = {"hal/asgi.py", "hal/urls.py", "hal/routing.py", "hal/settings.py"}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every absolute import in a module (also those inside functions), as (line, module)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def upward_imports(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, module) for each import of a higher app by a lower one, wiring excepted."""
    found = []
    for app, rank in LAYERS.items():
        for path in sorted((root / app).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in WIRING:
                continue
            for line, module in imports_of(path):
                top = module.split(".")[0]
                if top in LAYERS and LAYERS[top] > rank:
                    found.append((rel, line, module))
    return found


def test_no_lower_app_imports_a_higher_one():
    # There are no exceptions: a lower app that needs a higher one's code gets a hook that
    # the higher app fills from its AppConfig.ready() (hal.hooks.fleet_http, hal.hooks.workers…).
    found = [f"{rel}:{line} imports {module}" for rel, line, module in upward_imports(ROOT)]
    assert not found, "lower app imports a higher one (see docs/architecture.md):\n" + "\n".join(
        found
    )


def test_the_check_sees_imports_inside_functions_and_spares_the_wiring(tmp_path):
    for app in LAYERS:
        (tmp_path / app).mkdir()
    (tmp_path / "hal" / "things.py").write_text("def f():\n    from chatrooms import models\n")
    (tmp_path / "hal" / "urls.py").write_text("import chatrooms.urls\n")
    (tmp_path / "vault" / "api.py").write_text("from hal.errors import HalError\n")
    (tmp_path / "providers" / "x.py").write_text("import webfetch.guard\nimport vault.api\n")
    assert upward_imports(tmp_path) == [
        ("hal/things.py", 2, "chatrooms"),
        ("providers/x.py", 1, "webfetch.guard"),
    ]


def module_imports(root: Path) -> dict[str, set[str]]:
    """The apps' modules (migrations aside) → the apps' modules each imports (also inside
    functions; `from package import name` counts the submodule `name` when there is one)."""
    files: dict[str, Path] = {}
    for app in LAYERS:
        for path in (root / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a loop (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while (top := stack.pop()) != node:
                group.append(top)
            if group:
                circles.append(sorted([node, *group]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_module_imports_round_a_circle():
    # A shared piece moves down to the lower module (or a hook inverts the import), so
    # every module can be read, typed and tested from the bottom up.
    assert import_circles(module_imports(ROOT)) == []


def test_the_circle_check_sees_lazy_and_relative_imports(tmp_path):
    for app in LAYERS:
        (tmp_path / app).mkdir()
    (tmp_path / "hal" / "__init__.py").write_text("")
    (tmp_path / "hal" / "a.py").write_text("from . import b\n")
    (tmp_path / "hal" / "b.py").write_text("def f():\n    from hal.c import x\n")
    (tmp_path / "hal" / "c.py").write_text("import hal.a\n")
    (tmp_path / "hal" / "d.py").write_text("from hal import a\n")
    assert import_circles(module_imports(tmp_path)) == [["hal.a", "hal.b", "hal.c"]]


# The rooms of hal/ (ADR 0017), bottom to top: a room imports its own modules and those of
# lower rooms only. Each room's job is in its package docstring; docs/architecture.md has
# the map. The core is hal's top-level modules that everything uses; `agent` is the node
# agent, a program of its own that imports nothing of HAL's but itself.
HAL_ROOMS = {
    "core": 0,  # errors, i18n (with the labels of codes and fields), version, paths
    "agent": 0,
    "db": 1,
    "hooks": 1,
    "observe": 1,  # HAL observed: metric families and scrape-time sources (issue 47)
    "web": 2,
    "live": 3,
    "models": 4,
    "actions": 5,
    "queries": 6,
    "tools": 7,
    "mcp": 8,
    "views": 9,
    "templatetags": 10,
    "management": 10,
    "admin": 10,
}
HAL_CORE = {"errors", "i18n", "version", "paths"}
# The wiring and the app config put the rooms together: they may import any of them.
HAL_WIRING = {"settings", "urls", "asgi", "routing", "apps"}
# Downward-looking imports that run upward, each with its reason. Lazy (inside a function),
# so no module imports round a circle.
HAL_ROOM_EXCEPTIONS = {
    # A proposal is a tool call: its actions read the tool registry (tier, schema), the
    # call's origin and hand the decision to the continuation hook.
    ("hal.actions.proposals.records", "hal.tools.registry"),
    ("hal.actions.proposals.create", "hal.tools.origin"),
    ("hal.actions.proposals.create", "hal.tools.registry"),
    ("hal.actions.proposals.approve", "hal.tools.origin"),
    ("hal.actions.proposals.approve", "hal.tools.continuation"),
    ("hal.actions.proposals.lifecycle", "hal.tools.continuation"),
}


def hal_room(module: str) -> str | None:
    """The room of a hal module (None outside hal)."""
    parts = module.split(".")
    if parts[0] != "hal":
        return None
    if len(parts) == 1 or parts[1] in HAL_CORE:
        return "core"
    if parts[1] in HAL_WIRING:
        return "wiring"
    return parts[1]


def room_violations(root: Path) -> list[str]:
    """'module -> module' for each import of a higher (or unknown) room of hal."""
    found = []
    for name, targets in sorted(module_imports(root).items()):
        room = hal_room(name)
        if room is None or room == "wiring":
            continue
        for target in sorted(targets):
            other = hal_room(target)
            if other is None or other == room or (name, target) in HAL_ROOM_EXCEPTIONS:
                continue
            if room not in HAL_ROOMS or other == "wiring" or other not in HAL_ROOMS:
                found.append(f"{name} -> {target} (a room of hal/ that the rule does not know)")
            elif HAL_ROOMS[other] >= HAL_ROOMS[room]:
                found.append(f"{name} ({room}) -> {target} ({other})")
    return found


def test_each_room_of_hal_imports_only_the_rooms_below_it():
    found = room_violations(ROOT)
    assert not found, "a room of hal/ imports one at its level or above (ADR 0017):\n" + (
        "\n".join(found)
    )


def test_hal_keeps_at_most_a_dozen_top_level_modules_and_every_room_says_its_job():
    modules = sorted(p.name for p in (ROOT / "hal").glob("*.py"))
    assert len(modules) <= 12, modules
    assert {p.stem for p in (ROOT / "hal").glob("*.py")} - {"__init__", "admin"} <= (
        HAL_CORE | HAL_WIRING
    )
    rooms = [p for p in (ROOT / "hal").iterdir() if (p / "__init__.py").exists()]
    assert {p.name for p in rooms} - {"migrations"} - HAL_CORE <= HAL_ROOMS.keys()
    for room in rooms:
        if room.name == "migrations":
            continue
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"hal/{room.name}/__init__.py has no docstring saying its job"


def test_the_room_check_sees_an_upward_import(tmp_path):
    for app in LAYERS:
        (tmp_path / app).mkdir()
    for room in ("db", "live", "web"):
        (tmp_path / "hal" / room).mkdir()
        (tmp_path / "hal" / room / "__init__.py").write_text("")
    (tmp_path / "hal" / "__init__.py").write_text("")
    (tmp_path / "hal" / "errors.py").write_text("")
    (tmp_path / "hal" / "db" / "rows.py").write_text("from hal.errors import x\n")
    (tmp_path / "hal" / "web" / "api.py").write_text("from hal.db import rows\n")
    (tmp_path / "hal" / "live" / "events.py").write_text("def f():\n    import hal.web.api\n")
    (tmp_path / "hal" / "db" / "threads.py").write_text("from hal.live import events\n")
    (tmp_path / "hal" / "settings.py").write_text("import hal.live.events\n")
    assert room_violations(tmp_path) == [
        "hal.db.threads (db) -> hal.live (live)",
        "hal.db.threads (db) -> hal.live.events (live)",
    ]
