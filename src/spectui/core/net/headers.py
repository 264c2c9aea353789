"""Which headers an HTTP intermediary passes on, both ways (RFC 9110 §7.6.1).

Hop-by-hop headers describe one connection, not the message: ``Connection`` and every header it
names, ``Keep-Alive``, ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade`` and the
``Proxy-*`` family (``Proxy-Authorization`` is the client's credential for *this* proxy, never
the next hop's). The proxy frames each message itself, so ``Host`` and ``Content-Length`` are its
own too, and ``Expect`` is answered here (the body is read whole before anything goes upstream).
"""

from __future__ import annotations

from collections.abc import Iterable

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Per-connection headers named by RFC 9110 §7.6.1 (plus the legacy ``Proxy-Connection``)."""

FRAMED_HERE = frozenset({"host", "content-length", "expect"})
"""Request headers the proxy writes itself for the next hop."""


def connection_bound(names_and_values: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Every header name (lower case) that belongs to this connection only: the fixed set plus
    what ``Connection`` lists."""
    named = {
        token.strip().lower()
        for name, value in names_and_values
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }
    return HOP_BY_HOP | named


def is_hop(name: str, bound: frozenset[str]) -> bool:
    """Whether the lower-case ``name`` stays on this hop."""
    return name in bound or name.startswith("proxy-")


def end_to_end(
    headers: Iterable[tuple[str, str]], *, drop: frozenset[str]
) -> list[tuple[str, str]]:
    """``headers`` without the hop-by-hop ones and those in ``drop`` (lower-case names)."""
    headers = list(headers)
    bound = connection_bound(headers)
    return [(n, v) for n, v in headers if not is_hop(n.lower(), bound) and n.lower() not in drop]


def end_to_end_raw(
    headers: Iterable[tuple[bytes, bytes]], *, drop: frozenset[bytes] = frozenset()
) -> list[tuple[bytes, bytes]]:
    """The same for raw (bytes) headers, names lower-cased on the way (an answer's headers)."""
    lowered = [(name.lower(), value) for name, value in headers]
    bound = connection_bound((n.decode("latin-1"), v.decode("latin-1")) for n, v in lowered)
    return [
        (name, value)
        for name, value in lowered
        if not is_hop(name.decode("latin-1"), bound) and name not in drop
    ]


__all__ = [
    "FRAMED_HERE",
    "HOP_BY_HOP",
    "connection_bound",
    "end_to_end",
    "end_to_end_raw",
    "is_hop",
]
