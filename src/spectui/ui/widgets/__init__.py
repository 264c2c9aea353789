"""Widgets of the main screen; each draws what it is handed and holds no engine reference."""
