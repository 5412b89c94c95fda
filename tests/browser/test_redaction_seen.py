"""The operator sees what was held back from a model (issue 44, item 3), in a real browser:
a job log carries fresh canary secrets, the scripted model reads it; the reply's meta line
counts the secrets and names their kinds, the tool-result chip is marked, and no canary is
anywhere in the page — live and after a reload, in both languages."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.test_proposals_ui import READY, models_ready, say
from tests.fakes.script import Reply, ScriptedToolCall
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, forms, shaped

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "The job log holds a database password: [secret:url-password#1]."


def plant_job_log(lines: list[str]) -> int:
    """A finished job whose log carries the canary lines; its id, for the model to ask for."""
    from django.utils import timezone

    from hal.models.fleet import Job, JobLogLine

    job = Job.objects.create(
        kind=Job.HEALTH_CHECK, status=Job.SUCCEEDED, finished_at=timezone.now()
    )
    for seq, text in enumerate(lines, start=1):
        JobLogLine.objects.create(job=job, seq=seq, text=text)
    Job.objects.filter(pk=job.pk).update(log_seq=len(lines))
    return job.pk


def leaked(html: str, values: dict[str, str]) -> list[str]:
    """Every form a canary could travel in (itself, escaped, encoded) found in the page."""
    return [form for value in values.values() for form in forms(value) if form in html]


# The panel's words (hal/views/context.py, Korean from locale/ko): the meta line, the
# chip's mark and the mark's explanation on hover.
WORDS = {
    "en-US": (
        "2 secrets held back",
        "secrets held back",
        "Secrets in this result were replaced with placeholders before a model read it",
    ),
    "ko-KR": (
        "비밀값 2개 가림",
        "비밀값 가림",
        "이 결과의 비밀값은 모델이 읽기 전에 자리표시자로 바뀌었습니다",
    ),
}


@pytest.mark.parametrize("locale", list(WORDS))
def test_the_operator_sees_what_was_held_back_and_never_the_secret(
    live_asgi,
    page_factory,
    operator,
    fake_anthropic,
    provider_api_key,
    locale,
):
    held_back, chip_mark, chip_title = WORDS[locale]
    base = live_asgi.url
    models_ready(page_factory, base, operator, fake_anthropic, provider_api_key)
    fresh = shaped()
    lines = embed(fresh)
    values = {k: fresh[k] for k in ("aws", "url")}
    job = plant_job_log([lines["aws"], "health check passed", lines["url"]])
    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("get_job", {"job": job, "log_tail": 10})]),
        Reply(text=REPLY),
    )
    page = page_factory(locale=locale)
    login(page, base, operator)
    page.wait_for_selector(READY, state="attached")
    if locale.startswith("ko"):
        with page.expect_navigation():
            page.select_option("#lang-select", "ko")
    page.wait_for_selector(READY, state="attached")
    say(page, "What went wrong in the last health check?")

    def seen(when: str) -> None:
        reply = page.locator("#ai-log .ai-msg", has_text=REPLY)
        # (a) the meta line: how many secrets, of which kinds (kinds are rule ids, sorted).
        expect(reply.locator(".ai-facts")).to_contain_text(
            f"{held_back} (aws-access-token, url-password)"
        )
        # (b) the chip of the read says redaction happened there.
        chip = reply.locator(".ai-tool-chip", has_text="get_job")
        expect(chip).to_have_attribute("data-redacted", "true")
        mark = chip.locator(".ai-tool-chip-redacted")
        expect(mark).to_have_text(chip_mark)
        expect(mark).to_have_attribute("title", chip_title)
        screenshot(page, f"redaction-seen-{locale}-{when}")
        # (c) no canary, in any encoding, anywhere in the page.
        assert leaked(page.content(), values) == []

    seen("live")
    page.reload()
    page.wait_for_selector(READY, state="attached")
    seen("reloaded")
    # And the model read the log with placeholders: the read went out, its canaries did not.
    assert len(fake_anthropic.requests_to("/v1/messages")) == 2
    assert wire_leaks(fake_anthropic, values) == []
