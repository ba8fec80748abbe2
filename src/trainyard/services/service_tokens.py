"""Each service replica attempt's own token: what tells a replica that a request came through this server.

A replica's port listens on its node, where any process can connect to it; ``/serve/`` checks the caller's team,
a direct connection does not. So each attempt of a replica gets 32 random bytes when it is launched: its launcher
reads them as a secret of the attempt (launch.secrets: into the command's environment as ``TRAINYARD_SERVICE_TOKEN``
only, masked in its log), the ``/serve/`` proxy and the service loop's probes send them in
``X-Trainyard-Service-Token``, and the built-in model server (serving/model_server/access.py) refuses a request
without them. The database keeps them sealed with the servers' secrets key, as team secrets are; the service's
API, events and logs never carry them.
"""

from __future__ import annotations

import logging
import secrets

from trainyard import envvars
from trainyard.errors import SecretKeyError
from trainyard.services.secret_box import SecretBox

log = logging.getLogger(__name__)
HEADER = envvars.SERVICE_TOKEN_HEADER.lower().encode()  # header names as the proxy passes them on (lower case)
KEPT = 4096  # opened tokens remembered; past this the memory starts afresh (each replica's is opened again, once)


class ServiceTokens:
    """Made at a replica's launch, sealed as ``ATTEMPT_ID TOKEN`` in its replica row; opened once per sealed value
    (Fernet's HMAC and AES per request or probe would be wasted work: the proxy reads routes twice a second)."""

    def __init__(self, box: SecretBox) -> None:
        self.box = box
        self._opened: dict[str, tuple[str, str] | None] = {}  # sealed -> (attempt id, token); None: cannot open

    def for_launch(self, attempt_id: str, sealed: str | None) -> str:
        """The sealed token of the attempt being launched: the one it has when it is launched again (its replica
        may run already, with that token), else a new one."""
        if sealed is not None and (opened := self._open(sealed)) is not None and opened[0] == attempt_id:
            return sealed
        return self.box.seal(f"{attempt_id} {secrets.token_urlsafe(32)}")

    def token(self, sealed: str | None) -> str | None:
        """The token in a replica row's ``sealed``; None for a replica launched without one (before tokens were)."""
        if sealed is None:
            return None
        opened = self._open(sealed)
        return opened[1] if opened is not None else None

    def headers(self, sealed: str | None) -> dict[str, str]:
        """The header a request of this server's own to the replica (a probe) carries."""
        token = self.token(sealed)
        return {envvars.SERVICE_TOKEN_HEADER: token} if token else {}

    def _open(self, sealed: str) -> tuple[str, str] | None:
        try:
            return self._opened[sealed]
        except KeyError:
            pass
        if len(self._opened) >= KEPT:
            self._opened.clear()
        try:
            attempt_id, _, token = self.box.open(sealed, "a service replica's token").partition(" ")
            opened: tuple[str, str] | None = (attempt_id, token)
        except SecretKeyError as e:  # its requests go without: the replica refuses them, this log says why
            log.error("%s", e)
            opened = None
        self._opened[sealed] = opened
        return opened
