"""What the headless `compare` and `tune` print on the terminal, drawn with Rich (no Textual):
on stderr a live view while they run (a line per run when stderr is not a terminal), on stdout
the final tables and plotext charts. The commands (`spectui.commands.compare`, `.tune`) run the
comparison and hand these its documents and events.
"""
