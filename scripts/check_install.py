"""Import every module of an installed HAL and run the pre-fetch's HTML extraction.

Run by scripts/check_install.sh inside a fresh virtualenv, from outside the source tree, so
only what `pip install .` put there is used: a runtime dependency missing from
pyproject.toml fails here (e.g. lxml's html.clean, which trafilatura's extraction needs).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import tempfile

PACKAGES = ("hal", "chatrooms", "providers", "vault", "webfetch")


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
    os.environ.setdefault("HAL_DATA_DIR", tempfile.mkdtemp(prefix="hal-check-"))
    import django

    django.setup()
    failed: list[str] = []
    count = 0
    for name in PACKAGES:
        package = importlib.import_module(name)
        if "site-packages" not in (package.__file__ or ""):
            print(f"{name} was imported from {package.__file__}, not the install", file=sys.stderr)
            return 2
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            try:
                importlib.import_module(module.name)
                count += 1
            except Exception as exc:  # report every broken module, not just the first
                failed.append(f"{module.name}: {type(exc).__name__}: {exc}")
    # The pre-fetch path end to end on a page: trafilatura + justext + lxml.html.clean.
    import lxml.html.clean  # noqa: F401

    from webfetch.extract import extract_html

    page = "<html><head><title>T</title></head><body><article><p>" + "word " * 60
    got = extract_html(page + "</p></article></body></html>")
    if got.method != "trafilatura" or "word" not in got.text:
        failed.append(f"webfetch.extract_html: trafilatura did not extract ({got.method})")
    for line in failed:
        print("FAILED", line, file=sys.stderr)
    print(f"imported {count} modules; extraction {got.method}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
