"""The installable package carries every app the settings install (check_install.sh in CI
proves it with pip; this says which app is missing, in a second)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def test_every_local_app_is_in_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    local = [app for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()]
    missing = [
        app for app in local if not any(fnmatch.fnmatch(app.split(".")[0], p) for p in include)
    ]
    assert local and not missing, f"add to [tool.setuptools.packages.find] include: {missing}"
