"""Guarded web fetching, extraction, caching and search for model context."""
