"""AI chat rooms: unified and individual rooms, messages, turns, proposals UI."""
