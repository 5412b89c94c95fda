"""The seams through which the apps above hal plug into it without hal importing them:
each module holds a registry that an upper app fills from its `AppConfig.ready()` —
incidents, proposals, prompt sections, the worker's sweeps and loops, and the fleet's
guarded HTTP.

Imports only the core (`errors`); every room of hal may call them.
"""
