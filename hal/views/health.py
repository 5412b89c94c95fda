"""GET /api/health — no login; the web process's readiness and the task worker's state
(the checks: hal/queries/health.py)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from hal.queries.health import run_checks_async, summarize
from hal.version import get_version


@require_GET
async def health(request: HttpRequest) -> JsonResponse:
    """Report status, readiness, version and each check; 503 only when not ready."""
    checks = await run_checks_async()
    ready, status = summarize(checks)
    body = {
        "status": status,
        "ready": ready,
        "version": get_version(),
        "checks": checks,
        "time": timezone.now().isoformat(),
    }
    return JsonResponse(body, status=200 if ready else 503)
