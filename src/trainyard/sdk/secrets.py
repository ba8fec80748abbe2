"""A team's secrets through the API: ``Client().secrets``. Values go in and are never read back.

```python
c = Client()
c.secrets.set("WANDB_API_KEY", os.environ["WANDB_API_KEY"])   # a maintainer of your team; team=... for another
c.secrets.list()                                              # names, who set them and when
c.submit({"command": "python train.py", "secrets": ["WANDB_API_KEY"]})
```
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from trainyard.sdk.http import Http
from trainyard.spec.secrets import SecretInfo, SecretValue

_LIST = TypeAdapter(list[SecretInfo])


class Secrets:
    def __init__(self, http: Http) -> None:
        self.http = http

    @staticmethod
    def _team(team: str | None) -> dict[str, Any]:
        return {"team": team} if team is not None else {}

    def set(self, name: str, value: str, team: str | None = None) -> SecretInfo:
        body = SecretValue(value=value).model_dump()  # checked here too: the error names `value`
        resp = self.http.request("PUT", f"/api/v1/secrets/{name}", params=self._team(team), json=body)
        return SecretInfo.model_validate(resp.json())

    def get(self, name: str, team: str | None = None) -> SecretInfo:
        return SecretInfo.model_validate(self.http.request("GET", f"/api/v1/secrets/{name}",
                                                           params=self._team(team)).json())

    def list(self, team: str | None = None) -> list[SecretInfo]:
        return _LIST.validate_python(self.http.request("GET", "/api/v1/secrets", params=self._team(team)).json())

    def rotate(self) -> dict[str, int]:
        """Re-seal every value with the first key of the server's key file (an admin's); see services/secret_box."""
        return self.http.request("POST", "/api/v1/secrets/rotate").json()

    def delete(self, name: str, team: str | None = None) -> None:
        self.http.request("DELETE", f"/api/v1/secrets/{name}", params=self._team(team))
