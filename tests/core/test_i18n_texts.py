"""hal.i18n's stored texts (issue 41): a text of several lines, nested texts for coded words
inside a sentence, and the HTML rendering that marks data (names, identifiers, a model's
words) as not to be translated."""

from __future__ import annotations

from django.utils.translation import gettext_noop

from hal import i18n


def test_a_list_of_lines_renders_line_by_line():
    lines = [i18n.text(gettext_noop("Likely cause")), "plain words"]
    assert i18n.render(lines, "en") == "Likely cause\nplain words"
    assert i18n.render(lines, "ko") == "추정 원인\nplain words"


def test_localize_renders_a_list_sibling_and_drops_it():
    payload = {"text": "Likely cause", "text_i18n": [i18n.text(gettext_noop("Likely cause"))]}
    assert i18n.localize(payload, "ko") == {"text": "추정 원인"}


def test_a_nested_text_renders_in_the_sentences_language():
    summary = i18n.text(
        gettext_noop("Isolate server {hostname} ({status})."),
        hostname="web-01",
        status=i18n.text(gettext_noop("active")),
    )
    assert i18n.render(summary, "en") == "Isolate server web-01 (active)."
    assert i18n.render(summary, "ko") == "web-01 서버를 격리합니다(활성)."


def test_html_marks_data_params_and_escapes_everything():
    value = i18n.text(
        gettext_noop("Isolate server {hostname} ({status})."),
        hostname="<b>web-01</b>",
        status=i18n.text(gettext_noop("active")),
    )
    html = i18n.render_html(value, "ko")
    assert html == '<span translate="no">&lt;b&gt;web-01&lt;/b&gt;</span> 서버를 격리합니다(활성).'
    lines = i18n.render_html([i18n.text(gettext_noop("Likely cause")), "a & b"], "en")
    assert lines == 'Likely cause<br><span translate="no">a &amp; b</span>'


def test_strip_removes_every_translation_key_for_readers_that_keep_english():
    data = {"text_i18n": ["x"], "links": [{"label": "a", "label_i18n": "b", "url": "/"}]}
    assert i18n.strip(data) == {"links": [{"label": "a", "url": "/"}]}
