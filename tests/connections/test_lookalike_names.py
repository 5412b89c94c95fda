"""Look-alike connection names: TR39 confusable skeletons and mixed scripts are refused."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry
from providers.models import AIConnection

from .conftest import API, call, error_code

pytestmark = pytest.mark.django_db

CYRILLIC_ER = "\u0440"  # р, looks like Latin p


def create(client, name: str):
    return call(
        client, "POST", API, {"name": name, "provider": "anthropic", "auth_method": "api_key"}
    )


def test_cyrillic_letter_inside_a_latin_name_is_refused(client_op):
    assert create(client_op, "inputbot").status_code == 201
    response = create(client_op, f"in{CYRILLIC_ER}utbot")
    assert response.status_code == 400
    assert error_code(response) == "name_confusable"
    assert "@inputbot" in response.json()["error"]["message"]
    assert list(AIConnection.objects.values_list("name", flat=True)) == ["inputbot"]
    refused = AuditEntry.objects.get(action="connections.create", result="refused")
    assert refused.error_code == "name_confusable"


def test_mixed_script_name_is_refused_even_without_a_twin(client_op):
    response = create(client_op, f"in{CYRILLIC_ER}utbot")
    assert response.status_code == 400 and error_code(response) == "name_mixed_script"
    assert not AIConnection.objects.exists()


@pytest.mark.parametrize(
    ("existing", "lookalike"),
    [
        ("ape", "\u0430\u0440\u0435"),  # whole-script Cyrillic аре
        ("\u0430\u0440\u0435", "ape"),  # and the other way round
        ("APE", "\u0391\u03a1\u0395"),  # Greek capitals ΑΡΕ
        ("claude", "cIaude"),  # capital I for l
        ("modem", "rnodern"),  # rn for m
        ("gpt1", "gptl"),  # digit one for l
        ("claude", "\uff43laude"),  # fullwidth ｃ
    ],
)
def test_skeleton_twins_are_refused(client_op, existing, lookalike):
    assert create(client_op, existing).status_code == 201
    response = create(client_op, lookalike)
    assert response.status_code == 400, response.content
    assert error_code(response) == "name_confusable"
    assert AIConnection.objects.count() == 1


@pytest.mark.parametrize(
    "name",
    ["클로드", "클로드2", "claude클로드", "gpt-4o_mini", "クロード", "深度求索", "Ελληνικά"],
)
def test_single_script_and_cjk_combinations_are_kept(client_op, name):
    response = create(client_op, name)
    assert response.status_code == 201, response.content
    assert AIConnection.objects.get().name == name


@pytest.mark.parametrize("name", ["클로드\u0434", "claude\u03b1", "gpt\u0661"])
def test_other_script_mixes_are_refused(client_op, name):
    response = create(client_op, name)
    assert response.status_code == 400 and error_code(response) == "name_mixed_script"


def test_distinct_names_next_to_each_other_are_fine(client_op):
    for name in ("claude", "claude2", "gpt", "클로드", "클로드2"):
        assert create(client_op, name).status_code == 201, name


def test_rename_to_a_lookalike_is_refused_and_keeping_the_name_is_fine(client_op):
    create(client_op, "inputbot")
    other = create(client_op, "helper").json()
    url = f"{API}/{other['id']}"
    response = call(client_op, "PATCH", url, {"name": "inputb\u043et"})  # Cyrillic о
    assert response.status_code == 400 and error_code(response) == "name_confusable"
    response = call(client_op, "PATCH", url, {"name": "\u0456nputbot"})  # Cyrillic і
    assert error_code(response) == "name_confusable"
    assert AIConnection.objects.get(pk=other["id"]).name == "helper"
    assert call(client_op, "PATCH", url, {"name": "helper", "role": "x"}).status_code == 200
    assert call(client_op, "PATCH", url, {"name": "helper2"}).status_code == 200
