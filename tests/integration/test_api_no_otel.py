"""FastAPI's own OpenTelemetry stays off in trainyard's API even where the process has providers configured (a
library, an operator's sitecustomize): no spans (each would carry the request's path and query), no request metrics,
no logs. In a process of its own: providers are set once per process. Without the setting: 4 spans and 2 metrics."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    from fastapi.testclient import TestClient
    from opentelemetry import _logs, metrics, trace
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, reader, logs = InMemorySpanExporter(), InMemoryMetricReader(), InMemoryLogExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    logger = LoggerProvider()
    logger.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _logs.set_logger_provider(logger)

    from trainyard.api.app import create_app
    from trainyard.config import ServerSettings
    from trainyard.engines.fake import FakeEngine
    from trainyard.services.platform import Platform
    from trainyard.spec.records import NodeInfo

    nodes = [NodeInfo(name="a", cpu=8, memory=16 * 2**30)]
    platform = Platform(ServerSettings(home=sys.argv[1], db=f"sqlite:///{sys.argv[1]}/db.sqlite", token="s3cret"),
                        engine=FakeEngine(nodes))
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": "Bearer s3cret"}) as tc:
        assert tc.get("/api/v1/jobs").status_code == 200
        refused = tc.post("/api/v1/jobs", json={"name": "x", "command": "true", "env": {"KEY": "hunter2"},
                                                "resources": {"cpu": "lots"}})
        assert refused.status_code == 422, refused.text
    data = reader.get_metrics_data()
    names = [m.name for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics for m in sm.metrics]
    print(len(spans.get_finished_spans()), names, len(logs.get_finished_logs()))
""")


def test_the_api_records_no_telemetry_of_its_own_with_providers_configured(tmp_path):
    pytest.importorskip("opentelemetry.sdk")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[-2] == "0 [] 0"
