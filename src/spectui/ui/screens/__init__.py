"""Screens: the main view, the pickers, help, confirmation and the no-model screen."""
