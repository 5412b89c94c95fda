"""A secret shown exactly once after POST/redirect/GET, never at rest in clear.

A page that creates a secret (a personal MCP token) answers its POST with a redirect, so a
reload repeats the GET, never the creation. The GET that follows must still show the new
secret, once. Keeping it in the session would leave it in clear in the session table until
that GET; so the session holds only a Fernet ciphertext (AES-128-CBC + HMAC-SHA256) and the
key goes to the creating browser alone, in a short-lived HttpOnly cookie scoped to the
page. Neither half shows the secret without the other, and the GET that reads it removes
both: a second read, another browser of the same session, or a copied session row finds
nothing.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken
from django.http import HttpRequest, HttpResponse

# The cookie lives long enough for the redirect's GET on a slow connection, no longer.
COOKIE_SECONDS = 120


def hold(request: HttpRequest, response: HttpResponse, slot: str, secret: str) -> None:
    """Keep `secret` for the next GET of this page (`response` is the POST's redirect)."""
    key = Fernet.generate_key()
    request.session[_name(slot)] = Fernet(key).encrypt(secret.encode()).decode()
    response.set_cookie(
        _name(slot),
        key.decode(),
        max_age=COOKIE_SECONDS,
        path=request.path,
        secure=request.is_secure(),
        httponly=True,
        samesite="Strict",
    )


def take(request: HttpRequest, slot: str) -> str | None:
    """The held secret, once (the session's half is removed whatever is found; `finish`
    removes the cookie's)."""
    sealed = request.session.pop(_name(slot), None)
    key = request.COOKIES.get(_name(slot))
    if not isinstance(sealed, str) or not key:
        return None
    try:
        return Fernet(key.encode()).decrypt(sealed.encode()).decode()
    except (InvalidToken, ValueError, TypeError):
        return None


def finish(request: HttpRequest, response: HttpResponse, slot: str) -> None:
    """Remove the key cookie the browser sent (with the GET that took the secret)."""
    if _name(slot) in request.COOKIES:
        response.delete_cookie(_name(slot), path=request.path, samesite="Strict")


def _name(slot: str) -> str:
    return f"hal_{slot}"
