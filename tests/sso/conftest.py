"""The real OpenID provider (django-oauth-toolkit, tests/oidc_provider) for the SSO tests,
HAL configured against it, and a browser-less walk through its login form."""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.bounds import WAIT
from tests.oidc_provider.process import Provider

CALLBACK = "http://testserver/oidc/callback/{}/"
ROLES = {
    "hal-viewers": "viewer",
    "hal-ops": "operator",
    "hal-high": "operator_high_risk",
    "hal-admins": "administrator",
}


@pytest.fixture(scope="session")
def op(tmp_path_factory):
    """One provider process for the session, with two clients: `hal` (provider `corp`,
    reached through the tamper proxy) and `hal-other` (provider `other`, reached directly,
    so a second issuer: the mix-up tests)."""
    secrets_ = {"hal": secrets.token_urlsafe(24), "hal-other": secrets.token_urlsafe(24)}
    provider = Provider(
        tmp_path_factory.mktemp("oidc-op"),
        [
            {
                "client_id": "hal",
                "client_secret": secrets_["hal"],
                "redirect_uris": [CALLBACK.format("corp")],
                "post_logout_redirect_uris": ["http://testserver/login/"],
            },
            {
                "client_id": "hal-other",
                "client_secret": secrets_["hal-other"],
                "redirect_uris": [CALLBACK.format("other")],
            },
        ],
    )
    provider.client_secrets = secrets_
    yield provider
    provider.stop()


@pytest.fixture
def sso(op, settings, tmp_path, db):
    """HAL with SSO on: `corp` (the proxy's issuer) and `other` (the direct issuer)."""
    from hal.web.oidc import forget_cache

    files = {}
    for client, secret in op.client_secrets.items():
        files[client] = tmp_path / f"{client}.secret"
        files[client].write_text(secret)
    settings.HAL_OIDC_PROVIDERS = [
        {
            "name": "corp",
            "label": "Corp ID",
            "issuer": op.issuer,
            "client_id": "hal",
            "secret_file": str(files["hal"]),
            "scopes": ["openid", "email", "profile", "groups"],
            "group_roles": ROLES,
        },
        {
            "name": "other",
            "label": "Other ID",
            "issuer": op.direct + "/o",
            "client_id": "hal-other",
            "secret_file": str(files["hal-other"]),
            "scopes": ["openid", "email", "profile", "groups"],
            "group_roles": ROLES,
        },
    ]
    settings.HAL_OIDC_BREAK_GLASS = ["glass"]
    forget_cache()
    op.proxy.rewrite_token = None
    yield op
    op.proxy.rewrite_token = None
    forget_cache()


def person(op: Provider, groups: list[str], **fields: Any) -> dict[str, str]:
    """A new person at the provider (unique name, per-run password)."""
    username = fields.pop("username", None) or "p" + secrets.token_hex(4)
    password = secrets.token_urlsafe(12)
    op.control(
        username, password=password, groups=groups, **{"email": f"{username}@corp.test", **fields}
    )
    return {"username": username, "password": password}


class Browser:
    """The provider side of a browser: follows the provider's redirects, fills its login
    form, and stops at HAL's callback (returned as path + query)."""

    def __init__(self) -> None:
        self.http = httpx2.Client(follow_redirects=False, timeout=WAIT)

    def authorize(self, url: str, who: dict[str, str] | None) -> str:
        for _ in range(10):
            if url.startswith("http://testserver/"):
                return url[len("http://testserver") :]
            answer = self.http.get(url)
            if answer.status_code in (301, 302, 303):
                url = str(answer.url.join(answer.headers["location"]))
                continue
            assert answer.status_code == 200, answer.text
            assert who is not None, "the provider asked for a login"
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', answer.text)
            assert token, answer.text
            posted = self.http.post(
                str(answer.url),
                data={
                    "csrfmiddlewaretoken": token.group(1),
                    "username": who["username"],
                    "password": who["password"],
                    "next": parse_qs(urlsplit(str(answer.url)).query)["next"][0],
                },
                headers={"Referer": str(answer.url)},
            )
            assert posted.status_code == 302, posted.text
            url = str(posted.url.join(posted.headers["location"]))
        raise AssertionError("the provider never sent the browser back")


def start(client, provider: str = "corp", next_url: str = "/") -> str:
    """HAL's login button: the provider's authorize URL."""
    answer = client.get(f"/oidc/login/{provider}/", {"next": next_url})
    assert answer.status_code == 302, answer.content
    return answer["Location"]


def sso_login(client, op: Provider, who: dict[str, str], provider: str = "corp"):
    """Log `who` in to HAL through the provider; return HAL's callback answer."""
    callback = Browser().authorize(start(client, provider), who)
    return client.get(callback)


def claims_of(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def signed(op: Provider, claims: dict[str, Any], *, key: Any = None, alg: str = "RS256") -> str:
    """A token signed with the provider's own key (or `key`), under the provider's kid."""
    own = RSAKey.import_key(op.key)
    kid = httpx2.get(op.direct + "/o/.well-known/jwks.json").json()["keys"][0]["kid"]
    return jwt.encode({"alg": alg, "kid": kid}, claims, key if key is not None else own)


def now() -> int:
    return int(time.time())
