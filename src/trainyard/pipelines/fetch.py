"""A component's text fetched over HTTP for a URL a user named: from a public address only, and from the very
address that was checked (a name that resolves to a public address for the check and to 127.0.0.1 for the
request, DNS rebinding, gets nothing), redirects checked hop by hop. The admin's catalog is trusted as it is."""

from __future__ import annotations

import ipaddress
import socket
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

MAX_REDIRECTS = 5


class Refused(ValueError):
    """A URL this server does not fetch for a user (not a failure to fetch: no cached copy stands in for it)."""


def public_address(url: str) -> str:
    """The address to connect to for ``url``: Refused unless every address its host has is a public one."""
    parts = urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise Refused(f"cannot resolve {parts.hostname!r}: {e}") from None
    addresses = [info[4][0].split("%")[0] for info in infos]
    if not addresses or not all(_global(ipaddress.ip_address(a)) for a in addresses):
        raise Refused(f"{parts.hostname} is a private address: only URLs under the server's component_catalog are "
                      "fetched from one")
    return addresses[0]


def _global(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Public, and so is any IPv4 address inside it (NAT64 64:ff9b::/96, 6to4, ::a.b.c.d, ::ffff:a.b.c.d): a
    private IPv4 reached through an IPv6 form is still private."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and (ip in _NAT64 or int(ip) >> 32 == 0):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None and not inner.is_global:
            return False
    return ip.is_global


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def get_text(url: str, timeout: float, trusted: Callable[[str], bool]) -> str:
    """The text at the http(s) ``url``; one a user named (``trusted`` says which are the admin's) is fetched as
    the module says."""
    import httpx

    # no proxy from the environment for a user's URL: a proxy would connect by the name, not the address checked
    with httpx.Client(timeout=timeout, follow_redirects=False) as admins, \
            httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as users:
        return _follow(url, trusted, admins, users)


def _follow(url: str, trusted: Callable[[str], bool], admins, users) -> str:  # noqa: ANN001
    import httpx

    for _ in range(MAX_REDIRECTS + 1):
        if trusted(url):
            resp = admins.get(url)
        else:
            parts = urlsplit(url)
            address = public_address(url)
            literal = f"[{address}]" if ":" in address else address
            netloc = f"{literal}:{parts.port}" if parts.port else literal
            resp = users.get(urlunsplit(parts._replace(netloc=netloc)),
                             headers={"Host": parts.netloc.rpartition("@")[2]},
                             extensions={"sni_hostname": parts.hostname})  # TLS checks the name, not the address
        if not resp.is_redirect:
            resp.raise_for_status()
            return resp.text
        location = resp.headers.get("location", "")
        url = str(httpx.URL(url).join(location))
        if not url.startswith(("http://", "https://")):
            raise Refused(f"a redirect to {url[:100]!r}: only http(s) is followed")
    raise Refused(f"more than {MAX_REDIRECTS} redirects")
