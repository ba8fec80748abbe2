"""``log_metrics`` from trainyard when it is installed; a print when the scripts are run by hand."""

try:
    from trainyard import log_metrics
except ImportError:  # run by hand where trainyard is not installed
    def log_metrics(step: int | None = None, **values: float) -> None:
        print(f"[metrics] step={step} " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)

__all__ = ["log_metrics"]
