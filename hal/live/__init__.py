"""The live layer: events published on commit, the channel layers and each socket's queue,
the /ws/ops/ consumer and what every socket shares (dispatch, origin check, session guard),
model calls sent before their events, and the streaming path's JSON.

Imports only the core and `db`; never models, actions, queries or views (the counters that
follow ops events live in `queries` and listen through `events.on_ops_event`).
"""
