"""Template tags of the console (Django finds them here): status and audit labels."""
