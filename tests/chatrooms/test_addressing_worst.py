"""The address parser is linear: hostile 20k/40k-character texts parse at once (issue 11 #5).

The bound is deliberately generous (seconds for work that takes milliseconds): the
quadratic parser needed 4-20 s per input here, so it cannot pass, and a busy shared
machine cannot make the linear one fail.
"""

from __future__ import annotations

import pytest

from chatrooms.addressing import Participant, parse_addressees, relay_mentions

PEOPLE = [Participant(1, "alpha"), Participant(2, "beta"), Participant(3, "클로드")]


def worst_inputs(size: int) -> list[str]:
    """Texts that made the old regexes backtrack, plus many-token and many-'@' texts."""
    unit = size // 3
    return [
        "a_." * unit,  # e-mail local part without '@': the reported stall
        "a." * (size // 2),  # same, for the URL scheme run
        "a-" * (size // 2),
        "a+" * (size // 2) + "@",
        "x" * (size - 4) + "://",
        ("www." * (size // 4))[:size],
        "@a" * (size // 2),
        "@" * size,
        " ".join(f"@n{i}" for i in range(size // 7)),  # thousands of distinct unknown names
        "alpha, " * (size // 7),  # a long leading chain
        ",@" * (size // 2),
        "https://x/" + ",@b" * unit,
    ]


@pytest.mark.timeout(5)
def test_operator_message_worst_cases_parse_quickly():
    for text in worst_inputs(20_000):
        parse_addressees(text, PEOPLE)


@pytest.mark.timeout(5)
def test_model_reply_worst_cases_parse_quickly():
    for text in worst_inputs(40_000):
        relay_mentions(text, PEOPLE, speaker_id=1)


def test_long_text_still_finds_the_mentions():
    text = "a_." * 6666 + " @beta " + "a." * 5000 + " mail ops@alpha.example.org"
    assert [p.connection_id for p in parse_addressees(text, PEOPLE).participants] == [2]
    many = " ".join(f"@n{i}" for i in range(3000)) + " @n1"
    assert len(parse_addressees(many, PEOPLE).unknown) == 3000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok,@beta look", [2]),  # after punctuation that is not part of an address
        ("x:@beta", []),  # `:`-glued, like a URL or key:value
        ("see https://x.org/a,@beta", []),  # inside a URL up to the next space
        ("see https://x.org/a @beta", [2]),
        ("www.example.org/,@beta", []),
        ("mailto:x,@beta", []),
        ("a+b@beta.org", []),
        ("@beta-- hi", [2]),  # trailing hyphens are not part of the name
        ("@- hi", []),
    ],
)
def test_mention_edges(text, expected):
    result = parse_addressees(text, PEOPLE)
    assert [p.connection_id for p in result.participants if not result.broadcast] == expected
    assert "" not in result.unknown


@pytest.mark.timeout(5)
def test_prefetch_url_finder_is_linear_in_trailing_closers():
    from webfetch.urls import extract_urls

    # Re-counting brackets per stripped character was quadratic (100k: ~10 s).
    assert extract_urls("see http://x/a(b)" + ")" * 100_000) == ["http://x/a(b)"]
    assert extract_urls("(http://x/a_(b))).") == ["http://x/a_(b)"]


async def test_a_large_reply_is_read_off_the_event_loop(monkeypatch):
    import threading

    from chatrooms import addressing

    threads: list[threading.Thread] = []
    real = addressing.relay_mentions

    def spy(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(addressing, "relay_mentions", spy)
    small = await addressing.arelay_mentions("@beta hi", PEOPLE, speaker_id=1)
    large = await addressing.arelay_mentions("@beta " + "a_." * 13_000, PEOPLE, speaker_id=1)
    assert [p.connection_id for p in small.relay] == [2] == [p.connection_id for p in large.relay]
    assert threads[0] is threading.current_thread()  # short: no thread hop
    assert threads[1] is not threading.current_thread()  # 39k characters: a worker thread
