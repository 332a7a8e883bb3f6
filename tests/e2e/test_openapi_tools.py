"""The OpenAPI document through the tools its users run on it (issue 47): Redocly's linter
(its recommended rules, as redocly.yaml configures them) finds nothing, openapi-spec-validator
passes, and the dashboard's types (ui/src/api/schema.d.ts) are what openapi-typescript makes
of the document now. The document is as strict as the server: the bounds the server enforces
are declared, optional query parameters are plain values (not nullable), and the operation
ids read as method names. That a generated client refuses what the server refuses at
type-check time is ui/src/api/contract-check.ts's part (``npm run typecheck``).

The Node tools come from ui/node_modules (``npm ci --prefix ui``); without them the module is
skipped, or fails under ``TICKWORK_REQUIRE_BROWSER=1`` as the dashboard's tests do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import typing
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate
from pydantic import TypeAdapter, ValidationError

from tickwork import reference
from tickwork.api.schemas import QUEUE_PATTERN, JobStateName, QueueName
from tickwork.config import MAX_MAX_ATTEMPTS, MAX_PRIORITY, MIN_PRIORITY, QUEUE_NAME
from tickwork.queue.admin import MAX_SEARCH_TEXT
from tickwork.queue.enqueue import MAX_UNIQUE_KEY_LENGTH

from .support import browser_missing

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "ui" / "node_modules" / ".bin"
TYPES = ROOT / "ui" / "src" / "api" / "schema.d.ts"
GENERATOR = ROOT / "ui" / "scripts" / "api-types.mjs"
"""openapi-typescript, with a small bounded integer made the union of its values."""
REGENERATE = (
    f"{reference.COMMAND} --openapi /tmp/openapi.json &&"
    " node ui/scripts/api-types.mjs /tmp/openapi.json ui/src/api/schema.d.ts"
)
PROBES = {("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics")}
"""The operations with no 4XX: no token, no parameter, no body (see redocly.yaml)."""
GUARD = 120.0  # not a timing assertion: only stops a hung tool from hanging the run

for tool in ("redocly", "openapi-typescript"):
    if not (BIN / tool).exists():
        browser_missing(f"{BIN / tool} is not installed (npm ci --prefix ui)")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return reference.openapi()


@pytest.fixture(scope="module")
def written(document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("openapi") / "openapi.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    quiet = {"REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
        env=os.environ | quiet,
        check=False,
    )


def test_redocly_finds_no_error_and_no_warning(written: Path) -> None:
    linted = run(
        BIN / "redocly", "lint", "--config", ROOT / "redocly.yaml", "--format", "json", written
    )
    report = json.loads(linted.stdout)
    problems = [f"{p['ruleId']}: {p['message']} at {p['location']}" for p in report["problems"]]
    assert report["totals"] == {"errors": 0, "warnings": 0, "ignored": 0}, "\n".join(problems)
    assert linted.returncode == 0, linted.stderr


def test_openapi_spec_validator_passes(document: dict[str, Any]) -> None:
    validate(document)


def test_the_dashboard_types_are_generated_from_the_document_as_it_is(
    written: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "schema.d.ts"
    made = run("node", GENERATOR, written, fresh)
    assert made.returncode == 0, made.stderr
    assert TYPES.exists(), f"{TYPES} is missing: run `{REGENERATE}`"
    assert TYPES.read_text(encoding="utf-8") == fresh.read_text(encoding="utf-8"), (
        f"{TYPES.relative_to(ROOT)} is stale: run `{REGENERATE}` and commit it"
    )


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def test_operation_ids_are_unique_camel_case_names(document: dict[str, Any]) -> None:
    ids = [operation["operationId"] for _, _, operation in operations(document)]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not re.fullmatch(r"[a-z]+(?:[A-Z][a-z]*)*", i)] == []
    found = {(m, p): o["operationId"] for m, p, o in operations(document)}
    assert found[("get", "/api/jobs")] == "listJobs"
    assert found[("post", "/api/jobs/{job_id}/retry")] == "retryJob"
    assert found[("post", "/api/admin/signals/{signal_id}/retry")] == "retrySignal"


def test_servers_licence_and_contact(document: dict[str, Any]) -> None:
    assert document["servers"][0]["url"] == "/"
    assert document["info"]["license"] == {"name": "Apache-2.0", "identifier": "Apache-2.0"}
    assert document["info"]["contact"]["url"] == "https://github.com/tickwork/tickwork/issues"
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_every_operation_but_the_probes_declares_a_4xx(document: dict[str, Any]) -> None:
    # the rule redocly.yaml turns off, kept for the operations it fits
    without = {
        (m, p)
        for m, p, o in operations(document)
        if not any(c.startswith("4") for c in o["responses"])
    }
    assert without == PROBES


def test_no_query_parameter_is_nullable(document: dict[str, Any]) -> None:
    nullable = [
        f"{m.upper()} {p} {parameter['name']}"
        for m, p, o in operations(document)
        for parameter in o.get("parameters", [])
        if "null" in json.dumps(parameter["schema"]) or "anyOf" in parameter["schema"]
    ]
    assert nullable == []


def test_the_bounds_the_server_enforces_are_declared(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]

    def value(schema: dict[str, Any]) -> dict[str, Any]:
        """The non-null variant of a field (a body field may be null: the task's own)."""
        variants = [v for v in schema.get("anyOf", [schema]) if v != {"type": "null"}]
        assert len(variants) == 1, schema
        return variants[0]

    priority = {"type": "integer", "minimum": MIN_PRIORITY, "maximum": MAX_PRIORITY}
    attempts = {"type": "integer", "minimum": 1, "maximum": MAX_MAX_ATTEMPTS}
    queue = {"type": "string", "pattern": QUEUE_PATTERN}
    for model in ("EnqueueIn", "ScheduleIn", "ScheduleEditIn"):
        assert value(schemas[model]["properties"]["priority"]) == priority, model
        assert value(schemas[model]["properties"]["queue"]) == queue, model
    assert value(schemas["EnqueueIn"]["properties"]["max_attempts"]) == attempts
    assert value(schemas["EnqueueIn"]["properties"]["unique_key"]) == {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_UNIQUE_KEY_LENGTH,
    }
    assert value(schemas["EnqueueIn"]["properties"]["timeout"])["exclusiveMinimum"] == 0
    assert value(schemas["JobFilterIn"]["properties"]["queue"]) == queue
    states = list(typing.get_args(JobStateName))
    assert value(schemas["JobFilterIn"]["properties"]["state"])["items"]["enum"] == states

    # wherever a request names a priority or a number of attempts, it is bounded
    unbounded = [
        f"{model}.{name}"
        for model, schema in schemas.items()
        if schema.get("additionalProperties") is False  # a request body
        for name, field in schema.get("properties", {}).items()
        if name in ("priority", "max_attempts")
        and not {"minimum", "maximum"} <= value(field).keys()
    ]
    assert unbounded == []

    listing = {p["name"]: p["schema"] for p in document["paths"]["/api/jobs"]["get"]["parameters"]}
    assert listing["state"]["items"] == {"type": "string", "enum": states}
    assert listing["queue"]["pattern"] == QUEUE_PATTERN
    assert listing["q"]["maxLength"] == MAX_SEARCH_TEXT
    # the pattern takes what the server's check takes (pydantic's regex, like JSON Schema's,
    # ends at $ with no newline allowed before it: Python's would need \\Z)
    for name in ("default", "a.b:c-d_e", "x" * 128, "x" * 129, "a b", "a/b", "é", "a\n", ""):
        try:
            TypeAdapter(QueueName).validate_python(name)
            taken = True
        except ValidationError:
            taken = False
        assert taken == bool(QUEUE_NAME.match(name)), name


def test_an_edit_declares_null_only_where_null_is_accepted(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for model, nullable in (
        ("ScheduleEditIn", {"queue", "priority"}),
        ("DefinitionEditIn", {"cron", "loop"}),
    ):
        properties = schemas[model]["properties"]
        found = {n for n, s in properties.items() if {"type": "null"} in s.get("anyOf", [])}
        assert found == nullable, model
