"""Specs: pydantic models, loaded from YAML with errors that name the field and line."""

from trainyard.spec.job import PRIORITY_CLASSES, Env, JobSpec, Resources, Retry
from trainyard.spec.loader import load_job, parse_job, parse_param_overrides

__all__ = [
    "PRIORITY_CLASSES", "Env", "JobSpec", "Resources", "Retry",
    "load_job", "parse_job", "parse_param_overrides",
]
