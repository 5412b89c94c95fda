"""HAL: the operations console core (settings, models, actions, views)."""
