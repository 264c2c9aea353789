"""Headless commands and the TUI launcher, one module each."""
