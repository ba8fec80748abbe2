"""The store: SQLAlchemy over SQLite (default) or PostgreSQL; the only place with SQL."""

from trainyard.store.store import Ending
from trainyard.store.store import Store as _CoreStore
from trainyard.store.telemetry import TelemetryMixin


class Store(TelemetryMixin, _CoreStore):
    """Jobs, attempts, logs, metrics and artifacts."""


__all__ = ["Ending", "Store"]
