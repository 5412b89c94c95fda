"""The installer's inputs: URLs, the systemd env file, the artifact's sha256 and download."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .errors import InstallError

CHUNK = 1024 * 1024
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_loopback(host: str | None) -> bool:
    """True for localhost and loopback addresses (127/8, ::1)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> urllib.parse.SplitResult:
    """HTTPS only; plain http is allowed for loopback (tests, daphne behind the proxy)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return parts
    if parts.scheme == "http" and is_loopback(parts.hostname):
        return parts
    raise InstallError(f"{what} must be https:// (plain http only on loopback): {url}")


def load_env_file(path: Path) -> dict[str, str]:
    """Parse a systemd EnvironmentFile the way systemd does, for the manage.py steps.

    systemd keeps an unquoted `value   # comment` whole, so such a line would give the
    services a different value than the comment suggests: it is refused here.
    """
    env: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InstallError(f"cannot read the env file {path}: {exc}") from exc
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not ENV_KEY.match(key):
            raise InstallError(f"{path}:{number}: not KEY=VALUE: {raw!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif re.search(r"\s#", value):
            raise InstallError(
                f"{path}:{number}: inline comment after {key}= (systemd would keep it in the "
                "value); move the comment to its own line"
            )
        env[key] = value
    return env


PATH_SETTINGS = ("HAL_DATA_DIR", "HAL_SQLITE_PATH", "HAL_VAULT_KEY_FILE")


def check_env(values: dict[str, str]) -> list[str]:
    """Problems in hal.env that would make a production install misbehave (empty: none)."""
    problems = []
    if not values.get("DJANGO_SECRET_KEY"):
        problems.append(
            "DJANGO_SECRET_KEY must be set (python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(50))')"
        )
    if not values.get("HAL_DATA_DIR"):
        problems.append("HAL_DATA_DIR must be set (e.g. /var/lib/hal)")
    for name in PATH_SETTINGS:
        if name not in values:
            continue  # the default, under HAL_DATA_DIR
        value = values[name]
        # Relative (and empty, which settings read as ".") means the service's working
        # directory: the read-only release.
        if not value.startswith("/"):
            problems.append(f"{name}={value} must be an absolute path (or the line removed)")
    if values.get("HAL_PRODUCTION", "1").lower() not in {"1", "true", "yes", "on"}:
        problems.append("HAL_PRODUCTION must be 1 (or absent: the units set it)")
    if values.get("HAL_WEBFETCH_ALLOW_LOOPBACK", "0").lower() in {"1", "true", "yes", "on"}:
        problems.append("HAL_WEBFETCH_ALLOW_LOOPBACK is for tests only")
    if "HAL_STATIC_ROOT" in values:
        problems.append("HAL_STATIC_ROOT: remove the line; the proxy serves current/staticfiles")
    return problems


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Stream url to dest (certificates verified by the default context; no http redirects)."""
    check_url(url, "artifact URL")
    opener = urllib.request.build_opener(_NoDowngradeRedirects)
    try:
        with opener.open(url, timeout=timeout) as resp, open(dest, "wb") as out:
            while chunk := resp.read(CHUNK):
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        dest.unlink(missing_ok=True)
        raise InstallError(f"download of {url} failed: {exc}") from exc


class _NoDowngradeRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to another URL that passes check_url (never https → http)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        check_url(newurl, "redirect target")
        return super().redirect_request(req, fp, code, msg, headers, newurl)
