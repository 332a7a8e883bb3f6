"""The attempt-path tally exposes valid Prometheus histograms and counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from tickwork.ops.metrics import DURATION_BUCKETS, _Tally


def test_tally_exposes_cumulative_buckets_inclusive_upper_bounds() -> None:
    tally = _Tally()
    registry = CollectorRegistry()
    registry.register(tally)
    for seconds in (0.0005, 0.005, 0.005, 7.0, 5000.0):
        tally._observe(tally.duration, "t", DURATION_BUCKETS, seconds)
    tally.finished[("t", "SUCCEEDED")] = 4
    text = generate_latest(registry).decode()
    assert 'tickwork_execution_duration_seconds_bucket{le="0.001",task="t"} 1.0' in text
    assert 'tickwork_execution_duration_seconds_bucket{le="0.005",task="t"} 3.0' in text
    assert 'tickwork_execution_duration_seconds_bucket{le="10.0",task="t"} 4.0' in text
    assert 'tickwork_execution_duration_seconds_bucket{le="+Inf",task="t"} 5.0' in text
    assert 'tickwork_execution_duration_seconds_count{task="t"} 5.0' in text
    assert 'tickwork_attempts_finished_total{outcome="SUCCEEDED",task="t"} 4.0' in text
