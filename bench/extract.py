"""Extraction throughput: webfetch.extract vs raw trafilatura on generated realistic HTML.

Usage: .venv/bin/python bench/extract.py [--pages 200] [--seed 7] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trafilatura

from webfetch.extract import extract

WORDS = (
    "server disk alarm storage node release rollback incident latency replica backup "
    "cluster kernel memory network packet queue worker deploy canary budget restore "
    "operator approval proposal module version throughput timeout retry certificate"
).split()
KOREAN = "서버 디스크 경보 저장소 노드 배포 롤백 장애 지연 복제 백업 운영자 승인 제안".split()


def _sentence(rng: random.Random) -> str:
    pool = WORDS if rng.random() < 0.8 else KOREAN
    words = [rng.choice(pool) for _ in range(rng.randint(8, 22))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 6)))


def make_page(rng: random.Random, i: int) -> str:
    """A news/docs-style page: head with scripts/styles, nav, article, sidebar, footer."""
    nav = "".join(f'<li><a href="/s/{j}">{rng.choice(WORDS).title()}</a></li>' for j in range(25))
    body = []
    for s in range(rng.randint(3, 8)):
        body.append(f"<h2>Section {s}: {rng.choice(WORDS)}</h2>")
        body.extend(f"<p>{_paragraph(rng)}</p>" for _ in range(rng.randint(2, 6)))
        if rng.random() < 0.3:
            rows = "".join(
                f"<tr><td>{rng.choice(WORDS)}</td><td>{rng.randint(1, 999)}</td></tr>"
                for _ in range(8)
            )
            body.append(f"<table><tr><th>name</th><th>value</th></tr>{rows}</table>")
        if rng.random() < 0.3:
            body.append("<pre><code>$ systemctl restart hal\n$ journalctl -u hal</code></pre>")
    sidebar = "".join(
        f'<div class="ad"><a href="/ad/{j}">Sponsored {j}</a></div>' for j in range(10)
    )
    comments = "".join(
        f'<div class="comment"><b>user{j}</b><p>{_sentence(rng)}</p></div>' for j in range(8)
    )
    script = "window.__STATE__=" + "{" + ",".join(f'"k{j}":{j}' for j in range(300)) + "};"
    style = "".join(f".c{j}{{margin:{j}px;color:#{j:06x}}}" for j in range(200))
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Ops note {i}: {rng.choice(WORDS)} {rng.choice(WORDS)}</title>"
        f"<style>{style}</style><script>{script}</script></head><body>"
        f"<header><ul class='nav'>{nav}</ul></header>"
        f"<main><article><h1>Ops note {i}</h1>{''.join(body)}</article>"
        f"<aside>{sidebar}</aside><section class='comments'>{comments}</section></main>"
        f"<noscript>Please enable JavaScript</noscript>"
        f"<footer><p>© HAL</p>{nav}</footer><script>track({i});</script></body></html>"
    )


def _run(label: str, fn: Callable[[bytes], object], pages: list[bytes], rounds: int) -> dict:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for page in pages:
            fn(page)
        times.append(time.perf_counter() - started)
    best = min(times)
    mb = sum(len(p) for p in pages) / 1e6
    return {
        "label": label,
        "pages_s": len(pages) / best,
        "mb_s": mb / best,
        "ms_page": best / len(pages) * 1000,
        "median_s": statistics.median(times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pages = [make_page(rng, i).encode() for i in range(args.pages)]
    total_mb = sum(len(p) for p in pages) / 1e6
    print(
        f"corpus: {len(pages)} generated pages, {total_mb:.2f} MB "
        f"(avg {total_mb * 1000 / len(pages):.1f} KB/page), best of {args.rounds} rounds"
    )

    rows = [
        _run(
            "trafilatura.extract (raw)",
            lambda b: trafilatura.extract(b.decode()),
            pages,
            args.rounds,
        ),
        _run(
            "webfetch.extract (title+text+caps)",
            lambda b: extract(b, "text/html"),
            pages,
            args.rounds,
        ),
    ]
    head = f"{'extractor':<38}{'pages/s':>10}{'MB/s':>10}{'ms/page':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['label']:<38}{r['pages_s']:>10.1f}{r['mb_s']:>10.2f}{r['ms_page']:>10.2f}")
    print(
        f"overhead of webfetch.extract vs raw: "
        f"{(rows[0]['pages_s'] / rows[1]['pages_s'] - 1) * 100:+.1f}% time per page"
    )


if __name__ == "__main__":
    main()
