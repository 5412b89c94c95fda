"""The database on the hot paths: fixed-shape SQL built once (`rows`) and the dedicated
threads async code reaches the database through (`threads`).

Imports only `hal.errors`; every other room may import it.
"""
