"""A password hasher for the test suite only (tests/settings.py)."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2-SHA256 at 1,000 rounds: hashes any process on HAL's real settings can check."""

    iterations = 1_000
