"""HTTP plumbing of a web process: the ASGI handler, middlewares, the client address behind
the proxy, untrusted input (JSON, text, ids), the JSON API helpers, sessions and stopping
in time.

Imports only the core and `db`: everything above it (the live layer, actions, views) may
use it.
"""
