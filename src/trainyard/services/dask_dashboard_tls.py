"""A Dask scheduler's preload (passed as its text: the scheduler's Python may have no trainyard): its dashboard
takes only clients holding a certificate of the cluster's CA, as its scheduler port does.

The dashboard shows the cluster's tasks, workers and their logs, and it listens on the node's address, where any
team's job reaches it. Dask serves it over TLS when ``distributed.scheduler.dashboard.tls`` names a certificate,
but asks the client for none ("just encryption"). This module is imported when the scheduler is made, before its
dashboard listens, so the context Dask makes for it requires the client's certificate from the first
connection; once the scheduler starts, :func:`dask_setup` checks that it does, and stops the dashboard where a
Dask of another version made its context some other way: no dashboard rather than one open to all. The trainyard
server reaches it with the cluster's client certificate (``services.dask_clusters.dashboard_target``).
"""

import ssl
import sys

import distributed.node


class _Mutual:
    """What ``distributed.node`` reads of :mod:`ssl`, with the client's certificate required."""

    Purpose = ssl.Purpose

    @staticmethod
    def create_default_context(*args, **kwargs):  # noqa: ANN002, ANN003, ANN205
        context = ssl.create_default_context(*args, **kwargs)
        context.verify_mode = ssl.CERT_REQUIRED
        return context


distributed.node.ssl = _Mutual


def dask_setup(scheduler) -> None:  # noqa: ANN001  (a distributed.Scheduler)
    server = getattr(scheduler, "http_server", None)
    context = getattr(server, "ssl_options", None)
    if server is not None and (not isinstance(context, ssl.SSLContext) or context.verify_mode != ssl.CERT_REQUIRED):
        server.stop()
        print("trainyard: this Dask's dashboard would take clients without the cluster's certificate: stopped",
              file=sys.stderr, flush=True)
