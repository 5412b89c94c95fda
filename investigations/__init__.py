"""A model's first look at an incident: a room, read-only tools, a summary on the timeline."""
