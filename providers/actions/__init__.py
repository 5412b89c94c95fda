"""AI connection actions: create, update, enable/disable, delete, secrets, verify, OAuth.

Views, the admin site, consumers and commands call the `check_*` functions only. Every
secret goes straight into the vault; rows, audit entries and events carry hints only.

A package of modules named after what they hold: fields (input cleaning), status
(locking, snapshots, events, enable/disable), connections (create/update/delete),
secrets, verify and oauth. Every public name is re-exported here, so
`from providers.actions import check_create_connection` keeps working.
"""

from __future__ import annotations

from providers.actions.connections import (
    check_create_connection,
    check_delete_connection,
    check_update_connection,
    do_create_connection,
    do_delete_connection,
    do_update_connection,
)
from providers.actions.fields import (
    CLIENT_ID_MAX,
    CREATE_FIELDS,
    IMMUTABLE_FIELDS,
    OAUTH_FIELDS,
    SCOPES_MAX,
    UPDATE_FIELDS,
    URL_MAX,
    clean_name,
    clean_url,
    resolve_connection,
)
from providers.actions.oauth import (
    OAUTH_STATE_TTL,
    OAuthStart,
    check_oauth_callback,
    check_oauth_start,
    do_store_oauth_tokens,
    hash_state,
    oauth_redirect_uri,
)
from providers.actions.secrets import (
    check_delete_connection_secret,
    check_set_connection_secret,
    do_set_connection_secret,
)
from providers.actions.status import (
    check_set_connection_enabled,
    check_set_redaction_patterns,
)
from providers.actions.verify import (
    VerifyOutcome,
    acheck_verify_connection,
    check_verify_connection,
    do_record_verification,
    in_transaction,
    verification_fields,
    verify_now,
)

__all__ = [
    "CLIENT_ID_MAX",
    "CREATE_FIELDS",
    "IMMUTABLE_FIELDS",
    "OAUTH_FIELDS",
    "OAUTH_STATE_TTL",
    "SCOPES_MAX",
    "UPDATE_FIELDS",
    "URL_MAX",
    "OAuthStart",
    "VerifyOutcome",
    "acheck_verify_connection",
    "check_create_connection",
    "check_delete_connection",
    "check_delete_connection_secret",
    "check_oauth_callback",
    "check_oauth_start",
    "check_set_connection_enabled",
    "check_set_connection_secret",
    "check_set_redaction_patterns",
    "check_update_connection",
    "check_verify_connection",
    "clean_name",
    "clean_url",
    "do_create_connection",
    "do_delete_connection",
    "do_record_verification",
    "do_set_connection_secret",
    "do_store_oauth_tokens",
    "do_update_connection",
    "hash_state",
    "in_transaction",
    "oauth_redirect_uri",
    "resolve_connection",
    "verification_fields",
    "verify_now",
]
