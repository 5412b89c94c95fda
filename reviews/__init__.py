"""Second opinions: another model reviews each write/high-risk proposal (advice only)."""
