"""The suite's bound for waiting on a condition: generous, so that a busy machine (CI, a
developer's laptop at load 12) never fails a wait — only a hang does (issue 43)."""

WAIT = 120.0  # seconds: a bound for a hung wait, not a measure of speed
