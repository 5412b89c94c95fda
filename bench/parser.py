"""Address-parser cost on hostile and ordinary texts: microseconds per KB (issue 11 #5).

Usage: .venv/bin/python bench/parser.py [--kb 20 40] [--rounds 5]

Prints one line per (input, size) with the best of `rounds` runs for the operator-message
parser (`parse_addressees`) and the model-reply parser (`relay_mentions`), plus the URL
finder of the pre-fetch (`webfetch.urls.extract_urls`). A linear parser shows the same
µs/KB at every size; a backtracking one grows with the size.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatrooms.addressing import Participant, parse_addressees, relay_mentions
from webfetch.urls import extract_urls

PEOPLE = [Participant(1, "alpha"), Participant(2, "beta"), Participant(3, "클로드")]


def inputs(size: int) -> dict[str, str]:
    """The worst cases known for the old regexes, and a plain chat text for scale."""
    return {
        "a_. (e-mail run)": ("a_." * (size // 3 + 1))[:size],
        "a. (scheme run)": ("a." * (size // 2 + 1))[:size],
        "@a@a (at signs)": ("@a" * (size // 2 + 1))[:size],
        "@n1 @n2 (unknown)": " ".join(f"@n{i}" for i in range(size))[:size],
        "url + ) (closers)": "http://x/" + ")" * (size - 9),
        "chat text": ("@alpha please check https://example.org/a and ops@example.org. " * size)[
            :size
        ],
    }


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kb", type=int, nargs="+", default=[20, 40])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'input':<20} {'KB':>4} {'message µs/KB':>14} {'reply µs/KB':>12} {'urls µs/KB':>11}")
    for kb in args.kb:
        for name, text in inputs(kb * 1000).items():
            per_kb = 1e6 / kb
            message = best(lambda t=text: parse_addressees(t, PEOPLE), args.rounds) * per_kb
            reply = best(lambda t=text: relay_mentions(t, PEOPLE, speaker_id=1), args.rounds)
            urls = best(lambda t=text: extract_urls(t, max_urls=2), args.rounds) * per_kb
            print(f"{name:<20} {kb:>4} {message:>14.1f} {reply * per_kb:>12.1f} {urls:>11.1f}")


if __name__ == "__main__":
    main()
