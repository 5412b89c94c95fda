"""The order in which pytest-xdist hands test files to its workers (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence

# The files that take minutes start first. pytest-xdist hands whole files to its workers
# (--dist loadfile) in this order (--no-loadscope-reorder, Makefile): its own reordering,
# by number of tests, put these few-test files last, each then running alone on one worker
# while the others had finished — the tail of CI's run. Longest first, as measured
# (`--junitxml` of CI's first pass, 2026-12-06: the §6 layout test under a real systemd
# ~12 min alone; the docs' §2–§4 blocks, ship, install, the width matrix of every page,
# then the shorter deploy files, each one to four minutes on a loaded machine).
LONG_FILES_FIRST = (
    "tests/deploy/test_layout_e2e.py",
    "tests/deploy/test_docs_commands.py",
    "tests/deploy/test_ship.py",
    "tests/deploy/test_install.py",
    "tests/browser/test_layout_pages.py",
    "tests/deploy/test_install_entry.py",
    "tests/deploy/test_ship_security.py",
    "tests/deploy/test_host_python.py",
    "tests/deploy/test_install_security.py",
)

# A package whose files share package-scoped fixtures that cost seconds to build (the
# browser tests' daphne and chromium: ~10 s a worker): its files run as one block, so a
# worker builds them once for the block instead of once each time the order interleaved
# them with other packages' files (11 times a pass, measured 2026-12-05).
CONTIGUOUS_PACKAGES = ("tests/browser/",)


# pytest-xdist's loadfile scheduler gives each worker its file, then at once a second one
# to every worker whose first file has at most this many tests (it refills a worker "almost
# depleted of work"): that second file waits behind the first. Behind the §6 test (one test,
# ~15 min) it was the page-width matrix, which then ran in the pass's last minutes.
XDIST_REFILL_AT = 2


def file_order(paths: Sequence[str], workers: int = 0) -> list[int]:
    """The indexes of `paths` (each test's file, in collection order) in the order to run:
    the long files first, then each contiguous package's files, then the rest; within
    each group the files with the most tests first; a file's own order unchanged. With
    `workers`, a file that xdist hands out at once behind a long one of few tests is one of
    the smallest files instead (XDIST_REFILL_AT)."""
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    counts: dict[str, int] = {}
    for path in paths:
        counts[path] = counts.get(path, 0) + 1

    def group(path: str) -> int:
        if path in rank:
            return rank[path]
        for n, package in enumerate(CONTIGUOUS_PACKAGES):
            if path.startswith(package):
                return len(rank) + n
        return len(rank) + len(CONTIGUOUS_PACKAGES)

    order = sorted(
        range(len(paths)), key=lambda i: (group(paths[i]), -counts[paths[i]], paths[i], i)
    )
    units: list[list[int]] = []
    for i in order:
        if units and paths[units[-1][0]] == paths[i]:
            units[-1].append(i)
        else:
            units.append([i])
    queued = workers
    for first in units[:workers]:
        if len(first) <= XDIST_REFILL_AT and queued < len(units) - 1:
            units.insert(queued, units.pop())  # the last: of the rest, the fewest tests
            queued += 1
    return [i for unit in units for i in unit]
