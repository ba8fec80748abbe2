"""The store: SQLAlchemy over SQLite (default) or PostgreSQL; the only place with SQL."""

from trainyard.store.moves import Admission, Ending, Waiting
from trainyard.store.store import Store as _CoreStore
from trainyard.store.monitoring import MonitoringMixin
from trainyard.store.identity import IdentityMixin
from trainyard.store.queues import QueuesMixin
from trainyard.store.telemetry import Outputs, TelemetryMixin
from trainyard.store.usage import IdleRule, SpansMixin, UsageMixin


class Store(UsageMixin, SpansMixin, MonitoringMixin, TelemetryMixin, QueuesMixin, IdentityMixin, _CoreStore):
    """Jobs, attempts, logs, metrics, artifacts, queues, resource use, events, users, tokens and the audit log."""


__all__ = ["Admission", "Ending", "IdleRule", "Outputs", "Store", "Waiting"]
