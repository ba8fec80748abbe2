"""Which certificates a client trusts for a server, and what it says when it does not trust one.

A server started with ``--tls-cert`` records that certificate's path (public; never its key) in its
home's ``server.json``. The CLI and SDK of the same home trust it for that server's URL alone, so a
self-signed certificate works on the server's own machine without ``SSL_CERT_FILE``; a client of
another home, or of any other URL, checks the usual way. What the user chose to trust
(``SSL_CERT_FILE``, ``SSL_CERT_DIR``) is trusted there too, beside the home's certificate, not
instead of it: distributions and sandboxes set those variables to the system's bundle for every
process, and a certificate the user never named would then be refused as before. A ``transport``
handed to :class:`~trainyard.sdk.client.Client` decides alone.

Standard library only: :mod:`trainyard.sdk.quick` uses it before httpx is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from trainyard.home import read_address
from trainyard.locations import ADDRESS_FILE, home as default_home

if TYPE_CHECKING:
    import ssl


def home_cert(url: str, home: Path | None = None) -> str | None:
    """The certificate the home's server serves at ``url``, if it recorded one."""
    if not url.startswith("https://"):
        return None
    info = read_address(Path(home or default_home()) / ADDRESS_FILE)
    if info is None or info["url"].rstrip("/") != url.rstrip("/"):
        return None
    cert = info.get("tls_cert")
    return cert if isinstance(cert, str) and os.path.isabs(cert) and os.path.isfile(cert) else None


def context_for(url: str, home: Path | None = None) -> ssl.SSLContext | None:
    """An SSL context that trusts the home's certificate for ``url`` (:func:`home_cert`); None: the default."""
    cert = home_cert(url, home)
    if cert is None:
        return None
    import ssl  # here: a plain http:// command never loads it

    try:
        context = ssl.create_default_context(cafile=cert)
        if os.environ.get("SSL_CERT_FILE"):
            context.load_verify_locations(cafile=os.environ["SSL_CERT_FILE"])
        if os.environ.get("SSL_CERT_DIR"):
            context.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
    except (OSError, ssl.SSLError):
        return None  # unreadable or not PEM: the default check fails and says why
    # the served certificate itself is the anchor, as a browser's exception would be: a leaf issued by
    # a CA (its chain not in the file) is trusted as it is, not refused for a missing root
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def untrusted(error: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed behind ``error`` (httpx wraps it), or None."""
    import ssl

    seen: BaseException | None = error
    for _ in range(8):  # bounded: a chain of causes could loop
        if seen is None or isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def untrusted_message(url: str, failed: ssl.SSLCertVerificationError) -> str:
    """What went wrong with ``url``'s certificate, and what fixes it."""
    why = failed.verify_message or str(failed)
    if failed.verify_code == 62:  # X509_V_ERR_HOSTNAME_MISMATCH
        fix = (f"make the certificate name the address clients use (subjectAltName IP:{urlsplit(url).hostname}; "
               "127.0.0.1 for a server bound to 0.0.0.0)")
    else:
        fix = ("if the server's certificate is self-signed, trust it: SSL_CERT_FILE=cert.pem (the CLI and "
               "SDK of the server's own home trust it by themselves)")
    return f"the trainyard server at {url} answered with a certificate this client does not trust ({why}); {fix}"
