"""The browser harness: a Playwright driver that died is replaced; only its errors rerun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.bounds import SLOW
from tests.browser.conftest import HARNESS_GONE, _driver_pids


def test_a_dead_driver_is_replaced_by_a_working_browser(chromium):
    first = chromium.get()
    assert chromium.get() is first  # alive: the same browser
    restarts = chromium.restarts
    (driver,) = _driver_pids()
    os.kill(driver, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while driver in _driver_pids() and time.monotonic() < deadline:
        time.sleep(0.05)

    second = chromium.get()
    assert second is not first and chromium.restarts == restarts + 1
    assert len(_driver_pids()) == 1
    context = second.new_context()
    page = context.new_page()
    page.set_content("<p id=p>still here</p>")
    assert page.inner_text("#p") == "still here"
    context.close()


def test_browser_tests_rerun_once_and_only_when_the_harness_went_away(request, tmp_path):
    (mark,) = request.node.iter_markers("flaky")  # the hook marks every browser test
    tests = tmp_path / "test_inner.py"
    tests.write_text(
        f"""
import pytest
seen = {{}}
flaky = pytest.mark.flaky(**{mark.kwargs!r})

def once(name, error):
    seen[name] = seen.get(name, 0) + 1
    if seen[name] == 1:
        raise error

@flaky
def test_harness_gone():
    once("gone", Exception({HARNESS_GONE[0]!r}))

@flaky
def test_own_failure():
    once("own", AssertionError("the page said no"))
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTEST"))}
    plugins = ["-p", "no:cacheprovider", "-p", "no:django", "-p", "no:xdist"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, "-rfR", str(tests)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SLOW,
    )
    assert "1 failed, 1 passed, 1 rerun" in done.stdout, done.stdout
    assert "FAILED test_inner.py::test_own_failure" in done.stdout


def test_the_rerun_patterns_are_playwrights_own_words():
    import playwright

    missing = set(HARNESS_GONE)
    for folder, _, files in os.walk(os.path.dirname(playwright.__file__)):
        for name in files:
            if missing and name.endswith((".py", ".js")):
                with open(os.path.join(folder, name), errors="replace") as fh:
                    text = fh.read()
                missing = {words for words in missing if words not in text}
    assert not missing, f"{missing} no longer in Playwright: the rerun would never match"
