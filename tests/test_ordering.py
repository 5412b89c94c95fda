"""The order of test files handed to pytest-xdist's workers (tests/ordering.py)."""

from __future__ import annotations

from tests.ordering import LONG_FILES_FIRST, file_order


def ordered_files(paths: list[str]) -> list[str]:
    files: list[str] = []
    for i in file_order(paths):
        if not files or files[-1] != paths[i]:
            files.append(paths[i])
    return files


def test_long_files_first_then_the_browser_block_then_the_rest_by_size():
    paths = (
        ["tests/core/test_a.py"] * 5
        + ["tests/browser/test_x.py"] * 2
        + ["tests/chatrooms/test_b.py"] * 9
        + [LONG_FILES_FIRST[1]] * 3
        + ["tests/browser/test_y.py"] * 4
        + [LONG_FILES_FIRST[0]]
    )
    assert ordered_files(paths) == [
        LONG_FILES_FIRST[0],
        LONG_FILES_FIRST[1],
        "tests/browser/test_y.py",
        "tests/browser/test_x.py",
        "tests/chatrooms/test_b.py",
        "tests/core/test_a.py",
    ]


def test_a_files_own_tests_keep_their_order():
    paths = ["tests/core/test_a.py", "tests/browser/test_x.py", "tests/core/test_a.py"]
    order = file_order(paths)
    assert [i for i in order if paths[i] == "tests/core/test_a.py"] == [0, 2]


def test_every_long_file_exists():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert [p for p in LONG_FILES_FIRST if not (root / p).exists()] == []


def test_the_file_xdist_hands_out_at_once_behind_a_one_test_long_file_is_a_small_one():
    # xdist gives worker 0 the §6 test (one test), workers 1-3 the next long files, then at
    # once a second file to every worker holding <= 2 tests: here worker 0 only.
    paths = (
        [LONG_FILES_FIRST[0]]
        + [LONG_FILES_FIRST[1]] * 3
        + [LONG_FILES_FIRST[2]] * 4
        + [LONG_FILES_FIRST[3]] * 12
        + [LONG_FILES_FIRST[4]] * 6
        + ["tests/core/test_big.py"] * 40
        + ["tests/core/test_tiny.py"]
    )
    files = [paths[i] for i in file_order(paths, workers=4)]
    firsts = list(dict.fromkeys(files))
    assert firsts[:5] == [*LONG_FILES_FIRST[:4], "tests/core/test_tiny.py"]
    assert firsts[5:] == [LONG_FILES_FIRST[4], "tests/core/test_big.py"]
    # Without workers (one process), the plain order.
    assert list(dict.fromkeys(paths[i] for i in file_order(paths)))[-1] == "tests/core/test_tiny.py"


def test_the_refill_rule_is_xdists():
    # XDIST_REFILL_AT mirrors LoadScopeScheduling._reschedule's "pending > 2: return".
    import inspect

    from xdist.scheduler.loadscope import LoadScopeScheduling

    from tests.ordering import XDIST_REFILL_AT

    source = inspect.getsource(LoadScopeScheduling._reschedule)
    assert f"> {XDIST_REFILL_AT}:" in source
