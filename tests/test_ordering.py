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
