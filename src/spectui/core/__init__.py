"""The engine: server process, capabilities, streaming, attribution, metrics, memory.

Never imports textual (a test enforces it): everything here runs headless.
"""
