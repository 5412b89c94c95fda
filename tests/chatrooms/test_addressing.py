"""Addressing rules of the unified room: @name, leading `name:`/`name,`, Korean names."""

from __future__ import annotations

import pytest

from chatrooms.addressing import Participant, parse_addressees, relay_mentions

ALPHA = Participant(connection_id=1, name="alpha", active=True)
BETA = Participant(connection_id=2, name="Beta", active=True)
CLAUDE_KO = Participant(connection_id=3, name="클로드", active=True)
SLEEPY = Participant(connection_id=4, name="sleepy", active=False)
ALL = [ALPHA, BETA, CLAUDE_KO, SLEEPY]


def ids(result) -> list[int]:
    return sorted(p.connection_id for p in result.participants)


def test_no_name_addresses_every_active_model():
    result = parse_addressees("check the fleet", ALL)
    assert result.broadcast and ids(result) == [1, 2, 3]


@pytest.mark.parametrize(
    "text",
    ["@alpha check the fleet", "please ask @ALPHA.", "what do you think, @alpha?", "(@alpha)"],
)
def test_at_name_anywhere_case_insensitive(text):
    result = parse_addressees(text, ALL)
    assert not result.broadcast and ids(result) == [1]


@pytest.mark.parametrize("text", ["alpha: check", "Alpha, check", "  alpha : check"])
def test_leading_name_colon_or_comma(text):
    assert ids(parse_addressees(text, ALL)) == [1]


def test_leading_word_that_is_not_a_name_is_just_text():
    assert parse_addressees("Note: disks are full", ALL).broadcast


def test_leading_chain_of_names():
    assert ids(parse_addressees("alpha, beta: compare notes", ALL)) == [1, 2]


def test_korean_name_and_particle():
    assert ids(parse_addressees("@클로드 서버 상태 알려줘", ALL)) == [3]
    assert ids(parse_addressees("@클로드는 어떻게 생각해?", ALL)) == [3]
    assert ids(parse_addressees("클로드: 상태", ALL)) == [3]


def test_two_names_address_two_models():
    assert ids(parse_addressees("@alpha and @beta, compare", ALL)) == [1, 2]


def test_unknown_name_is_reported():
    result = parse_addressees("@gamma hi @alpha", ALL)
    assert result.unknown == ["gamma"]


def test_ascii_prefix_is_not_a_match():
    assert parse_addressees("@alphabet hi", ALL).unknown == ["alphabet"]


@pytest.mark.parametrize(
    "text",
    [
        "mail ops@alpha.example.org now",
        "see https://git.example.org/@alpha/repo",
        "see http://example.org/x?u=@beta",
    ],
)
def test_email_and_url_are_not_mentions(text):
    result = parse_addressees(text, ALL)
    assert result.broadcast and not result.unknown


def test_inactive_addressee_is_reported():
    result = parse_addressees("@sleepy wake up", ALL)
    assert [p.connection_id for p in result.inactive] == [4]


def test_relay_mentions_skip_self_inactive_and_unknown():
    text = "I agree. @beta can you check? also @alpha @sleepy @nobody @Beta"
    mentioned = relay_mentions(text, ALL, speaker_id=1)
    assert [p.connection_id for p in mentioned.relay] == [2]
    # Everyone named (but the speaker) counts for the second-hop notice.
    assert sorted(p.connection_id for p in mentioned.named) == [2, 4]


def test_relay_ignores_leading_name_prefix():
    # A model echoing "beta: ..." is not a hand-over; only @name is.
    assert relay_mentions("beta: fine", ALL, speaker_id=1).relay == []
