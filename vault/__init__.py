"""Encrypted secret storage: ciphertext rows, keyring, rotation."""
