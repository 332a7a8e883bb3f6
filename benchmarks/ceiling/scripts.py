"""pgbench scripts made of tickwork's own statements.

Every statement comes from the package's ``sql/*.sql`` through :class:`Statements` and every
parameter from the code that sends it (the enqueue path's rows and plan, the store's
parameter builders, the completer's outcome encoding, the worker's claim settings), so the
scripts follow the statements as they change. Nothing here is SQL copied by hand; the one
derived statement (the claim whose answer is the outcomes of the jobs it claimed, for the
claim + complete cycle) is the claim's own text up to its final SELECT, plus a final SELECT
that aggregates.

psycopg's ``%(name)s`` placeholders become pgbench variables (``:name``), given with ``-D``
and bound as parameters under ``-M prepared``, as psycopg binds them once it has prepared a
statement. pgbench has no NULL variable, so a parameter whose value is None is written as
``NULL`` in the script's text instead: what psycopg sends for None is a NULL too.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.app import App
from tickwork.cli.bench import BENCH_QUEUE, NOOP
from tickwork.config import WorkerSettings
from tickwork.db.statements import Statements
from tickwork.db.store.jobs import (
    JobRow,
    _insert_many_params,
    _insert_params,
    insert_many_statement,
)
from tickwork.queue.enqueue import JobSpec, insert_plan
from tickwork.types import ExecutionState
from tickwork.worker.completer import Completion, _outcomes
from tickwork.worker.worker import CLAIM_SERVER_SETTINGS, CLAIMS_IN_FLIGHT, WORKER_SERVER_SETTINGS

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
VARIABLE = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
WORKER_ID = uuid.UUID(int=0)
"""The claims' worker id (executions.worker_id has no foreign key: any uuid does)."""

CLAIM_SETTINGS = dict(CLAIM_SERVER_SETTINGS)
"""The worker's claim connections' settings (job_claim planned generically, no JIT)."""
WORKER_SETTINGS = dict(WORKER_SERVER_SETTINGS)
"""Its other connections' (outcome writes: every execution planned for its parameters)."""


def claim_batch(concurrency: int) -> int:
    """The most jobs one claim of a worker of ``concurrency`` asks for (worker.py's
    ``_claim_batch``: each of its claims in flight takes at most its share of the slots)."""
    return max(1, -(-concurrency // CLAIMS_IN_FLIGHT))


@dataclass
class Script:
    """One pgbench script and what it needs."""

    name: str
    """The workload and its batch size, e.g. ``claim-100``."""
    text: str
    variables: dict[str, str] = field(default_factory=dict)
    """Given to pgbench with ``-D``."""
    rows: int = 1
    """Jobs one transaction of the script inserts, claims or completes."""
    settings: dict[str, str] = field(default_factory=dict)
    """Server settings, as tickwork's connection running these statements sets them."""


def text_value(value: Any) -> str:
    """``value`` as the text of a parameter (psycopg's form of it, as PostgreSQL reads it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "{" + ",".join(_array_element(v) for v in value) + "}"
    return str(value)


def _array_element(value: Any) -> str:
    if value is None:
        return "NULL"
    text = text_value(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bind(statement: str, params: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """``statement`` with its placeholders as pgbench variables, and their values (text); a
    None is written into the text as NULL. Raises if a placeholder has no value, or if the
    text holds a ``:word`` pgbench would read as a variable that is not one of these."""
    variables: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise KeyError(f"no value for parameter {name!r}")
        value = params[name]
        if value is None:
            return "NULL"
        variables[name] = text_value(value)
        return ":" + name

    text = PLACEHOLDER.sub(replace, statement).replace("%%", "%")
    strays = set(VARIABLE.findall(text)) - set(variables)
    if strays:
        raise ValueError(f"pgbench would read {sorted(strays)} as variables")
    return text, variables


def final_select(statement: str) -> int:
    """Where the final top-level SELECT of ``statement`` begins (after its WITH clause)."""
    depth = 0
    found = -1
    i = 0
    n = len(statement)
    while i < n:
        ch = statement[i]
        if statement.startswith("--", i):
            i = statement.find("\n", i)
            if i < 0:
                break
        elif ch == "'":
            i = statement.find("'", i + 1)  # '' inside a literal: two literals, same depth
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif (
            depth == 0
            and statement[i : i + 6].upper() == "SELECT"
            and (i == 0 or not statement[i - 1].isalnum())
        ):
            found = i
        i += 1
    if found < 0:
        raise ValueError("no top-level SELECT in the statement")
    return found


def outcome_template() -> dict[str, Any]:
    """One SUCCEEDED outcome of a no-op handler as the completer encodes it."""
    done = Completion(0, 0, ExecutionState.SUCCEEDED, None, None, 0.0)
    outcome: dict[str, Any] = json.loads(_outcomes([done]))[0]
    return outcome


def claim_to_outcomes(claim: str) -> str:
    """The claim, answering one value: the JSON array of the outcomes (SUCCEEDED, as the
    completer would send them) of the jobs it claimed. Data-modifying CTEs must be top-level,
    so the claim and the completion cannot be one statement; this keeps the claim's CTEs as
    they are and replaces only its final SELECT (which returns the jobs to the worker)."""
    rest = {k: v for k, v in outcome_template().items() if k not in ("job_id", "execution_id")}
    # ": " keeps pgbench, which reads every ":word" as a variable (literals too), off it
    constant = json.dumps(rest, separators=(", ", ": ")).replace("'", "''")
    return (
        claim[: final_select(claim)]
        + "-- (derived for the ceiling: the claimed jobs' outcomes, as job_complete_many takes"
        + " them)\n"
        + f"SELECT coalesce(jsonb_agg('{constant}'::jsonb"
        + " || jsonb_build_object('job_id', c.id, 'execution_id', s.id)), '[]')::text"
        + " AS outcomes\nFROM claimed c\nJOIN started s ON s.job_id = c.id"
    )


class Scripts:
    """The scripts of one schema."""

    def __init__(self, app: App) -> None:
        """``app``: ``tickwork bench``'s app (its no-op task) on the scratch schema."""
        self.schema = app.settings.schema_name
        self.statements = Statements(self.schema)
        self.task = app.get_task(NOOP)
        self.lease_ttl = WorkerSettings().lease_ttl

    def job_rows(self, count: int, offset: int = 0) -> tuple[list[JobRow], list[dict[str, Any]]]:
        """``count`` jobs of the bench's no-op task as ``enqueue`` builds them: their rows and,
        beside them, their arguments."""
        specs = [JobSpec(NOOP, {"n": offset + i}) for i in range(count)]
        return [self.task.row(spec) for spec in specs], [dict(spec.args) for spec in specs]

    def claim_params(self, limit: int) -> dict[str, Any]:
        return {
            "queues": [BENCH_QUEUE],
            "tasks": [NOOP],  # the bench app's worker: its registered tasks
            "limit": limit,
            "worker_id": WORKER_ID,
            "lease_ttl": self.lease_ttl,
        }

    def insert_single(self) -> Script:
        plan = insert_plan(*self.job_rows(1))
        text, variables = bind(
            self.statements["job_insert"], _insert_params(plan.sent[0], plan.args)
        )
        return Script("insert-single", text + ";\n", variables, 1)

    def insert_batch(self, size: int) -> Script:
        plan = insert_plan(*self.job_rows(size))
        statement = insert_many_statement(plan.sent)  # the one enqueue_many sends for them
        params = _insert_many_params(plan.sent, plan.args)
        text, variables = bind(self.statements[statement], params)
        return Script(f"insert-batch-{size}", text + ";\n", variables, size)

    def claim(self, size: int) -> Script:
        text, variables = bind(self.statements["job_claim"], self.claim_params(size))
        return Script(f"claim-{size}", text + ";\n", variables, size, CLAIM_SETTINGS)

    def complete(self, size: int, batches_table: str) -> Script:
        """job_complete_many of ``size`` outcomes per transaction, prepared beforehand by
        the runner (one row per client and transaction); reading the batch is a
        read-only statement by primary key."""
        text, _ = bind(self.statements["job_complete_many"], {"outcomes": "set by \\gset"})
        lookup = (
            "\\set k :k + 1\n"
            f"SELECT outcomes FROM {self.schema}.{batches_table}"
            " WHERE client = :client_id AND k = :k \\gset\n"
        )
        return Script(f"complete-{size}", lookup + text + ";\n", {"k": "0"}, size, WORKER_SETTINGS)

    def cycle(self, size: int) -> Script:
        """Claim ``size`` and write their outcomes: the worker's drain, without the worker.
        Both statements share one connection, so the claim is planned as the outcome write
        is, for its parameters (``claim-N`` shows the claim connections' generic plan)."""
        claim = claim_to_outcomes(self.statements["job_claim"])
        claim_text, variables = bind(claim, self.claim_params(size))
        complete_text, _ = bind(self.statements["job_complete_many"], {"outcomes": ""})
        text = claim_text + " \\gset\n" + complete_text + ";\n"
        return Script(f"cycle-{size}", text, variables, size, WORKER_SETTINGS)

    def outcomes(self, pairs: list[tuple[int, int]]) -> str:
        """The JSON the completer sends for these (job id, execution id) pairs, SUCCEEDED."""
        return _outcomes(
            [Completion(j, e, ExecutionState.SUCCEEDED, None, None, 0.0) for j, e in pairs]
        )
