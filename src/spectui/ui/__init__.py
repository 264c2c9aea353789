"""The Textual user interface; draws only what `spectui.core` reports."""
