"""spectui: see speculative decoding happen in llama.cpp's llama-server."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("spectui")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
