"""One error tree for trainyard.

Every error has a stable ``code``. The API sends it in the JSON body and the
SDK maps it back to the same class, so ``except JobNotFound`` works on both
sides of the wire. The docstring is the default message.
"""

from __future__ import annotations

from typing import Any, ClassVar


class TrainyardError(Exception):
    """Something went wrong in trainyard."""

    code: ClassVar[str] = "error"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str | None = None, **details: Any) -> None:
        self.message = message or (self.__doc__ or self.code).strip()
        self.details = details
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidSpec(TrainyardError):
    """The job spec is not valid.

    Each of ``errors`` names its ``field`` (and ``line``, ``where``) in a spec; one with ``in`` names something
    else that is not valid (see :data:`PLACES`): a query parameter, a field of a request's body that is not a spec
    (a token's, a queue's), a server's config. The code stays ``invalid_spec`` for all of them, as clients catch
    it."""

    code = "invalid_spec"
    http_status = 422
    # what an error's "in" names, as its message says it (a body's field is not its name: a colon sets it off)
    PLACES: ClassVar[dict[str, str]] = {"query": "query parameter", "path": "path parameter", "header": "header",
                                        "url": "request", "body": "request body:", "config": "server config"}

    def __init__(self, message: str | None = None, errors: list[dict[str, Any]] | None = None) -> None:
        self.errors = errors or []
        if message is None:
            spec = [f"  {e['where']}: {e['message']}" for e in self.errors if not e.get("in")]
            message = "\n".join([self.said(e) for e in self.errors if e.get("in")]
                                + (["invalid spec:", *spec] if spec else []))
        super().__init__(message, errors=self.errors)

    @classmethod
    def said(cls, error: dict[str, Any]) -> str:
        """One error as a line: ``invalid query parameter since: must be …``, ``invalid request body: name: …``
        (the body's own, with no field: ``invalid request body: not JSON …``), or ``where: message`` in a spec."""
        place = cls.PLACES.get(error.get("in") or "")
        named = error.get("where") or error.get("field")
        # nothing named: the message alone (a body's own fault, a rule of several flags), not ": why"
        where = f"{named}: {error.get('message')}" if named else str(error.get("message"))
        return f"invalid {place} {where}" if place else where

    @classmethod
    def parameter(cls, name: str, message: str, place: str = "query") -> InvalidSpec:
        """A request's ``place`` parameter ``name`` is not valid."""
        return cls(errors=[{"field": name, "line": None, "where": name, "message": message, "in": place}])

    @classmethod
    def flag(cls, name: str, message: str) -> InvalidSpec:
        """A command-line flag's value is not valid: said as ``--name: message`` (the CLI exits 2)."""
        return cls(errors=[{"field": "", "line": None, "where": name, "message": message}])

    @classmethod
    def body(cls, field: str, message: str) -> InvalidSpec:
        """Field ``field`` of a request's body, one that is not a spec (a token's, a user's), is not valid."""
        return cls.parameter(field, message, "body")


class Unschedulable(TrainyardError):
    """The job asks for more than any node has; it could never run."""

    code = "unschedulable"
    http_status = 422


class Unsupported(TrainyardError):
    """This engine cannot run what the spec asks for."""

    code = "unsupported"
    http_status = 422


class NotFound(TrainyardError):
    """No such object."""

    code = "not_found"
    http_status = 404


class JobNotFound(NotFound):
    """No such job."""

    code = "job_not_found"


class AttemptNotFound(NotFound):
    """No such attempt."""

    code = "attempt_not_found"


class AttemptEnded(AttemptNotFound):
    """The attempt (or this replica of it) has ended: its launcher's reports change nothing now."""

    code = "attempt_ended"


class AttemptUnauthorized(TrainyardError):
    """A launcher report needs its attempt's own credential (Authorization: Bearer <attempt token>)."""

    code = "attempt_unauthorized"
    http_status = 401


class QueueNotFound(NotFound):
    """No such queue."""

    code = "queue_not_found"


class PipelineRunNotFound(NotFound):
    """No such pipeline run."""

    code = "pipeline_run_not_found"


class ArtifactNotFound(NotFound):
    """No such artifact."""

    code = "artifact_not_found"


class ClusterNotFound(NotFound):
    """No such Dask cluster."""

    code = "cluster_not_found"


class SweepNotFound(NotFound):
    """No such sweep."""

    code = "sweep_not_found"


class ScheduleNotFound(NotFound):
    """No such schedule."""

    code = "schedule_not_found"


class NodeNotFound(NotFound):
    """No such node."""

    code = "node_not_found"


class SecretNotFound(NotFound):
    """No such secret in that team."""

    code = "secret_not_found"


class SecretKeyError(TrainyardError):
    """This server cannot open the secrets: its key is missing or is not the one they were sealed with."""

    code = "secret_key"
    http_status = 500


class ServiceNotFound(NotFound):
    """No such service."""

    code = "service_not_found"


class ServiceUnavailable(TrainyardError):
    """The service has no ready replica to answer (yet)."""

    code = "service_unavailable"
    http_status = 503


class ReplicaUnreachable(TrainyardError):
    """The service's replica did not answer."""

    code = "replica_unreachable"
    http_status = 502


class DashboardUnavailable(TrainyardError):
    """The cluster's Dask dashboard does not answer."""

    code = "dashboard_unavailable"
    http_status = 502


class StorageError(TrainyardError):
    """The artifact store failed: unreachable, refused the credentials, or holds something else than recorded."""

    code = "storage_error"
    http_status = 502


class ObjectMissing(StorageError):
    """An object the database refers to is not in the artifact store."""

    code = "object_missing"


class ObjectCorrupt(StorageError):
    """An object in the artifact store does not match the size or digest recorded for it."""

    code = "object_corrupt"


class BodyTooLarge(TrainyardError):
    """The request's body is larger than this server takes for it."""

    code = "body_too_large"
    http_status = 413


class RangeNotSatisfiable(TrainyardError):
    """The byte range asked for lies outside the file."""

    code = "range_not_satisfiable"
    http_status = 416


class Conflict(TrainyardError):
    """The object changed under us; its status is not what the caller expected."""

    code = "conflict"
    http_status = 409


class AlreadyExists(Conflict):
    """An object with that name exists already."""

    code = "already_exists"


class InvalidTransition(Conflict):
    """That status change is not allowed."""

    code = "invalid_transition"


class HomeTaken(Conflict):
    """Another trainyard server holds this home."""

    code = "home_taken"


class Unauthorized(TrainyardError):
    """A valid bearer token is required: send the header "Authorization: Bearer <token>"."""

    code = "unauthorized"
    http_status = 401
    # what the CLI adds: its users send no header themselves, and the server cannot tell a missing token from a
    # revoked, expired or mistyped one (it says nothing of which to a stranger)
    HINT = ("the server took no token from this client: none was sent, or it is wrong, revoked or expired. Set "
            "TRAINYARD_TOKEN, or run `trainyard login --server URL` (a token saved per server); a server started "
            "with --token-file takes that file's token, not the home's")


class Forbidden(TrainyardError):
    """Your role does not allow that."""

    code = "forbidden"
    http_status = 403


class UserNotFound(NotFound):
    """No such user."""

    code = "user_not_found"


class TeamNotFound(NotFound):
    """No such team."""

    code = "team_not_found"


class TokenNotFound(NotFound):
    """No such token."""

    code = "token_not_found"


class ServerUnavailable(TrainyardError):
    """The trainyard server cannot be reached."""

    code = "server_unavailable"
    http_status = 503


class JobFailed(TrainyardError):
    """The job did not succeed."""

    code = "job_failed"
    http_status = 500


class WaitTimeout(TrainyardError):
    """The job did not finish in the time given."""

    code = "wait_timeout"
    http_status = 408


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def error_class(code: str) -> type[TrainyardError]:
    """The error class for a wire ``code``; unknown codes map to the base class."""
    for cls in _all_subclasses(TrainyardError):
        if cls.code == code:
            return cls
    return TrainyardError


def from_dict(body: dict[str, Any]) -> TrainyardError:
    cls = error_class(body.get("code", "error"))
    err = cls.__new__(cls)
    TrainyardError.__init__(err, body.get("message"), **(body.get("details") or {}))
    if isinstance(err, InvalidSpec):
        err.errors = err.details.get("errors", [])
    return err
