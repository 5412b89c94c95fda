"""HAL's settings for its test suite: the same, but with password hashing cheap enough for a
suite that hashes and checks operators' passwords thousands of times (Django's advice for
tests). The deploy tests install and run HAL with its real settings."""

from django.conf import global_settings

from hal.settings import *  # noqa: F403

# The same algorithm at 1,000 rounds (Django's default: 1,000,000, ~0.5 s of CPU per hash
# here). A process on hal.settings still reads these hashes (the rounds are in each hash)
# and upgrades one on its first successful check.
PASSWORD_HASHERS = [
    "tests.hashers.QuickPBKDF2PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]

# The suite starts ~100 web processes a pass (tests/webprocs.py, the browser tests' server),
# and each paid the model SDKs' imports while it started (~2-4 CPU-s on a 2-core CI
# machine), whether it called a model or not (the stop, health, page and socket tests do
# not). They import them at their first model call instead. The web process's own default
# (preloaded) is pinned by tests/core/test_gc_freeze.py.
HAL_PRELOAD_SDKS = False
