"""The Ray engine (``trainyard server --engine ray --ray-address HOST:PORT``); needs ``trainyard[ray]``."""

from __future__ import annotations

from trainyard.engines.ray.engine import RayEngine

__all__ = ["RayEngine"]
