"""Queue subscription is the isolation boundary: each runtime claims from one queue of its
own, and a script's language sends it to its runtime's queue alone."""

from __future__ import annotations

from tickwork.config import RUNTIME_NAMES, RuntimeSettings
from tickwork.definitions.records import (
    HTTP_QUEUE,
    LANGUAGES,
    RUNTIME_QUEUES,
    SCRIPT_QUEUES,
)
from tickwork.runtimes.available import executors


def test_the_runtimes_queues_are_disjoint_and_cover_every_language() -> None:
    assert set(RUNTIME_QUEUES) == set(RUNTIME_NAMES)
    queues = list(RUNTIME_QUEUES.values())
    assert len(set(queues)) == len(queues)  # no two runtimes share a queue
    assert "default" not in queues  # nor one with the application's own tasks
    assert set(SCRIPT_QUEUES) == set(LANGUAGES)
    runtime_of = {queue: name for name, queue in RUNTIME_QUEUES.items()}
    for language, queue in SCRIPT_QUEUES.items():
        expected = "node" if language == "typescript" else language
        assert runtime_of[queue] == expected, language
    assert RUNTIME_QUEUES["http"] == HTTP_QUEUE


def test_serve_claims_the_found_runtimes_queues_and_no_other() -> None:
    plans = dict(executors(["http", "bash", "groovy"], RuntimeSettings()))
    assert plans["http"].queues == ["http"]
    assert plans["scripts"].queues == ["scripts-bash", "scripts-groovy"]
    assert dict(executors(["python"], RuntimeSettings()))["scripts"].queues == ["scripts-python"]
    assert executors([], RuntimeSettings()) == []
