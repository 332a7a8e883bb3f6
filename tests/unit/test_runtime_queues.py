"""Queue subscription is the isolation boundary: each runtime claims from one queue of its
own, and a script's language sends it to its runtime's queue alone."""

from __future__ import annotations

import pytest

from tickwork.config import RUNTIME_NAMES, RuntimeSettings
from tickwork.definitions.records import (
    HTTP_QUEUE,
    HTTP_TASK,
    LANGUAGES,
    RUNTIME_QUEUES,
    SCRIPT_QUEUES,
    SCRIPT_TASK,
)
from tickwork.errors import ConfigError
from tickwork.runtimes.available import (
    TaskSelection,
    executors,
    refuse_runtime_queues,
    runtime_of,
)


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


def test_serve_runs_one_executor_per_runtime_at_its_own_concurrency() -> None:
    settings = RuntimeSettings.model_validate(
        {"http": {"concurrency": 7}, "scripts": {"concurrency": 3}}
    )
    assert executors(["groovy", "http", "bash"], settings) == [
        ("http", 7),
        ("bash", 3),
        ("groovy", 3),
    ]
    assert executors(["python"], RuntimeSettings()) == [("python", 5)]
    assert executors([], RuntimeSettings()) == []


def test_a_runtimes_queue_is_refused_to_any_other_worker_naming_what_to_run() -> None:
    for name, queue in RUNTIME_QUEUES.items():
        assert runtime_of(queue) == name
        with pytest.raises(ConfigError) as refused:
            refuse_runtime_queues(["default", queue])
        message = str(refused.value)
        assert f"worker.queues ({queue!r})" in message
        assert f"tickwork worker --runtime {name}" in message
        assert f"app.worker(runtime={name!r})" in message
    assert runtime_of("default") is None
    refuse_runtime_queues(["default", "mail"])  # none of them a runtime's


def test_a_runtimes_executor_has_its_runtimes_task_alone_and_others_none() -> None:
    registry = {"jobs.send": "app task", HTTP_TASK: "http", SCRIPT_TASK: "script"}
    assert dict(TaskSelection(registry, None)) == {"jobs.send": "app task"}
    assert dict(TaskSelection(registry, "http")) == {HTTP_TASK: "http"}
    for script in ("bash", "python", "node", "groovy"):
        assert dict(TaskSelection(registry, script)) == {SCRIPT_TASK: "script"}
    with pytest.raises(KeyError):
        TaskSelection(registry, None)[SCRIPT_TASK]
    selected = TaskSelection(registry, None)
    registry["jobs.later"] = "registered after"  # read live
    assert sorted(selected) == ["jobs.later", "jobs.send"] and len(selected) == 2
