"""Runbooks: versioned Markdown procedures operators write and models follow."""
