"""A local certificate authority for tests of HTTPS over loopback (trustme: nothing leaves the
machine)."""

from __future__ import annotations

import ssl

import trustme


def loopback_tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(a server context with its certificate for 127.0.0.1, a client context
    that trusts it)."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client
