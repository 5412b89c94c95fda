"""Notifications: operators reached by e-mail or webhook when HAL needs them (issue 27)."""
