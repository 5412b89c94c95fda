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
    # the higher app fills from its AppConfig.ready() (hal.fleet_http, hal.worker_hooks, ...).
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
