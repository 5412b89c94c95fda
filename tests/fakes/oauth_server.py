"""A fake OAuth 2.0 authorization server: authorize (code + state), token (PKCE S256), refresh."""

from __future__ import annotations

import base64
import hashlib
import http.client
import secrets
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from .httpserver import FakeHTTPServer, RecordedRequest, _Handler


@dataclass
class _Grant:
    client_id: str
    redirect_uri: str
    scope: str
    challenge: str
    method: str
    used: bool = False


def s256(verifier: str) -> str:
    """RFC 7636 S256, computed here independently of the code under test."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class FakeOAuthServer(FakeHTTPServer):
    """Authorization code + PKCE S256 with confidential or public clients; counts refreshes."""

    def __init__(self, *, client_id: str, client_secret: str | None = None) -> None:
        super().__init__()
        self.client_id = client_id
        self.client_secret = client_secret
        self.expires_in = 3600
        self.rotate_refresh_tokens = True
        self.token_delay = 0.0
        # The user's answer on the consent screen: set to an RFC 6749 §4.1.2.1 error code
        # (e.g. "access_denied") and the next authorization redirects back with it.
        self.deny_next: str | None = None
        self.grants: dict[str, _Grant] = {}
        self.refresh_tokens: set[str] = set()
        self.access_tokens: list[str] = []
        self.exchange_calls = 0
        self.refresh_calls = 0

    @property
    def authorize_url(self) -> str:
        return self.origin + "/authorize"

    @property
    def token_url(self) -> str:
        return self.origin + "/token"

    def revoke_refresh_tokens(self) -> None:
        """Make every refresh token invalid (the user revoked consent)."""
        with self.lock:
            self.refresh_tokens.clear()

    def approve(self, authorize_url: str) -> str:
        """Play the user's browser: open the authorize URL, return the redirect location."""
        parts = urlsplit(authorize_url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            conn.request("GET", f"{parts.path}?{parts.query}")
            response = conn.getresponse()
            response.read()
            if response.status != 302:
                raise AssertionError(f"authorize answered {response.status}")
            return response.getheader("Location") or ""
        finally:
            conn.close()

    def handle(self, handler: _Handler, request: RecordedRequest) -> None:
        if request.method == "GET" and request.path == "/authorize":
            self._authorize(handler, request)
        elif request.method == "POST" and request.path == "/token":
            self._token(handler, request)
        else:
            handler.send_json(404, {"error": "not_found"})

    def _authorize(self, handler: _Handler, request: RecordedRequest) -> None:
        q = {k: v[0] for k, v in request.query.items()}
        redirect_uri = q.get("redirect_uri", "")
        if q.get("client_id") != self.client_id or not redirect_uri:
            handler.send_json(400, {"error": "invalid_client"})
            return
        params: dict[str, str]
        with self.lock:
            denied, self.deny_next = self.deny_next, None
        if denied:
            params = {"error": denied, "state": q.get("state", "")}
        elif (
            q.get("response_type") != "code"
            or q.get("code_challenge_method") != "S256"
            or not q.get("code_challenge")
        ):
            params = {"error": "invalid_request", "state": q.get("state", "")}
        else:
            code = secrets.token_urlsafe(24)
            with self.lock:
                self.grants[code] = _Grant(
                    client_id=self.client_id,
                    redirect_uri=redirect_uri,
                    scope=q.get("scope", ""),
                    challenge=q["code_challenge"],
                    method=q["code_challenge_method"],
                )
            params = {"code": code, "state": q.get("state", "")}
        sep = "&" if "?" in redirect_uri else "?"
        handler.send_response(302)
        handler.send_header("Location", redirect_uri + sep + urlencode(params))
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _client_ok(self, request: RecordedRequest) -> bool:
        form = request.form
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("basic "):
            decoded = base64.b64decode(auth[6:]).decode()
            client_id, _, secret = decoded.partition(":")
        if client_id != self.client_id:
            return False
        if self.client_secret is None:
            return True
        return secret is not None and secrets.compare_digest(secret, self.client_secret)

    def _issue(self, scope: str) -> dict[str, object]:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        with self.lock:
            self.access_tokens.append(access)
            self.refresh_tokens.add(refresh)
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": refresh,
            "scope": scope,
        }

    def _token(self, handler: _Handler, request: RecordedRequest) -> None:
        failure = self.take_failure()
        if failure is not None:
            if failure.kind == "slow":
                self.sleep(failure.delay)
            elif failure.kind == "malformed":
                handler.send_raw(200, b"<html>oops", "text/html")
                return
            else:
                handler.send_json(int(failure.kind), {"error": "server_error"})
                return
        self.sleep(self.token_delay)
        form = request.form
        grant_type = form.get("grant_type")
        if not self._client_ok(request):
            handler.send_json(401, {"error": "invalid_client"})
            return
        if grant_type == "authorization_code":
            with self.lock:
                self.exchange_calls += 1
                grant = self.grants.get(form.get("code", ""))
                valid = (
                    grant is not None
                    and not grant.used
                    and grant.redirect_uri == form.get("redirect_uri")
                    and secrets.compare_digest(s256(form.get("code_verifier", "")), grant.challenge)
                )
                if grant is not None:
                    grant.used = True  # single use, even when the verifier was wrong
            if not valid:
                handler.send_json(
                    400, {"error": "invalid_grant", "error_description": "bad code or verifier"}
                )
                return
            handler.send_json(200, self._issue(grant.scope))
        elif grant_type == "refresh_token":
            token = form.get("refresh_token", "")
            with self.lock:
                self.refresh_calls += 1
                known = token in self.refresh_tokens
                if known and self.rotate_refresh_tokens:
                    self.refresh_tokens.discard(token)
            if not known:
                handler.send_json(
                    400, {"error": "invalid_grant", "error_description": "refresh token revoked"}
                )
                return
            payload = self._issue(form.get("scope", ""))
            if not self.rotate_refresh_tokens:
                payload["refresh_token"] = token
            handler.send_json(200, payload)
        else:
            handler.send_json(400, {"error": "unsupported_grant_type"})
