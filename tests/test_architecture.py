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
}

# The ASGI/URL wiring and the settings put every app together: they may import any app.
WIRING = {"hal/asgi.py", "hal/urls.py", "hal/routing.py", "hal/settings.py"}

# Upward imports that exist today, each with why; an entry goes when its import is inverted
# (a hook the higher app fills from its AppConfig.ready()). New ones are not added here.
KNOWN_UPWARD = {
    ("hal/fleet_http.py", "webfetch.client"): "fleet health checks use the guarded client",
    ("hal/fleet_http.py", "webfetch.guard"): "fleet health checks use the SSRF guard",
}


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
    new = [
        f"{rel}:{line} imports {module}"
        for rel, line, module in upward_imports(ROOT)
        if (rel, module) not in KNOWN_UPWARD
    ]
    assert not new, "lower app imports a higher one (see docs/architecture.md):\n" + "\n".join(new)


def test_every_known_upward_import_still_exists():
    # An inverted import leaves its entry behind: drop it so it cannot come back unnoticed.
    present = {(rel, module) for rel, _, module in upward_imports(ROOT)}
    assert not set(KNOWN_UPWARD) - present, sorted(set(KNOWN_UPWARD) - present)


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
