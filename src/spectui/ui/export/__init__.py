"""A recorded session drawn as a file: the renderers behind `spectui export`.

* `svg`: Textual's screenshot of the full TUI after replaying the session headless.
* `html`: one self-contained page (inline styles, no script, no external resource).
* `ansi`: text with truecolor escapes, for ``cat`` in a terminal or a chat paste.
* `cast`: an asciinema v2 recording that types the answer out with the run's real timing.

The text formats draw tokens as the TUI's token pane does (`transcript`): the theme's colours
(`palette`), accepted drafts also underlined so an export reads in monochrome, a chain's
drafters each with their colour and mark, tokens of unknown origin in italics, and the same
legend. The command (`spectui.commands.export`) parses options and writes the file.
"""
