"""Create the provider's database and OAuth clients from the run directory's clients.json
(run once per provider start, before the server)."""

import json

import django
from django.core.management import call_command


def main() -> None:
    """Migrate, then create each client of clients.json (confidential, code flow, RS256)."""
    django.setup()
    from oauth2_provider.models import Application

    from tests.oidc_provider.settings import RUN_DIR

    call_command("migrate", verbosity=0)
    for client in json.loads((RUN_DIR / "clients.json").read_text()):
        Application.objects.create(
            name=client["client_id"],
            client_id=client["client_id"],
            client_secret=client["client_secret"],
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(client["redirect_uris"]),
            post_logout_redirect_uris=" ".join(client.get("post_logout_redirect_uris", [])),
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )


if __name__ == "__main__":
    main()
