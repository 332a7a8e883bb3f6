"""The storage seam holds: every named statement in ``sql/*.sql`` is run by ``db/`` (a
store method named after it), every name ``db/`` asks for exists, and nothing outside ``db/``
names a statement or runs one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import tickwork
from tickwork.db.statements import _raw
from tickwork.db.store import Store

SOURCE = Path(tickwork.__file__).parent
DB = SOURCE / "db"
RUNNERS = frozenset({"_rows", "_tuples", "_rows_sync", "_tuples_sync", "fetch"})
"""What runs a statement inside ``db/``: the runner's methods (and the migrator's ``fetch``)."""
OUTSIDE_DB_FORBIDDEN = frozenset(
    {"fetch", "fetch_async", "fetch_tuples_async", "run_named", "Statements", "statements"}
)
"""Names by which code outside ``db/`` could reach a statement without the store."""
MACHINERY = ("migration_", "scratch_")
"""Statements run by ``db/``'s own machinery (the migrator, scratch schemas), not the store."""


def modules(inside_db: bool) -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(SOURCE.rglob("*.py")):
        if path.is_relative_to(DB) == inside_db:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(SOURCE)}:{getattr(node, 'lineno', '?')}"


def run_names(path: Path, tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(where, name) of each statement a runner is called with in ``db/``: the first string
    argument of ``_rows``/``_tuples``/... or ``statements["name"]``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in RUNNERS:
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        yield where(path, node), arg.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name == "statements" and isinstance(node.slice.value, str):
                yield where(path, node), node.slice.value


def test_every_statement_is_run_by_db() -> None:
    used = {name for path, tree in modules(inside_db=True) for _, name in run_names(path, tree)}
    assert sorted(set(_raw()) - used) == []


def test_every_statement_db_asks_for_exists() -> None:
    found = [found for path, tree in modules(inside_db=True) for found in run_names(path, tree)]
    assert len(found) > 100  # the calls are really seen
    assert [(at, name) for at, name in found if name not in _raw()] == []


def test_the_store_has_a_method_named_after_each_statement() -> None:
    missing = [
        name
        for name in _raw()
        if not name.startswith(MACHINERY)
        and not hasattr(Store, name)
        and not hasattr(Store, f"{name}_sync")
    ]
    assert missing == []


def test_nothing_outside_db_names_or_runs_a_statement() -> None:
    names = set(_raw())
    found = []
    for path, tree in modules(inside_db=False):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{where(path, node)} names {node.value!r}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tickwork.db"):
                taken = {alias.name for alias in node.names} & OUTSIDE_DB_FORBIDDEN
                found += [f"{where(path, node)} imports {name}" for name in sorted(taken)]
            elif isinstance(node, ast.Attribute) and node.attr in OUTSIDE_DB_FORBIDDEN:
                found.append(f"{where(path, node)} uses .{node.attr}")
    assert found == []


DRIVER_ERROR_NAMES = frozenset(
    {"Error", "DataError", "OperationalError", "InterfaceError", "DatabaseError", "PoolTimeout"}
)
"""psycopg's (and psycopg_pool's) error classes."""
READS_A_DRIVER_ERROR_OUTSIDE_DB = {"config.py"}
"""config.py checks a URL with libpq's parser, before there is any database to reach."""


def test_driver_errors_are_read_only_in_db() -> None:
    """Outside ``db/`` a driver error is caught as ``db.driver_errors``' names (or translated by its
    ``translating()``), never by psycopg's own classes: ``db/driver_errors.py`` is the one place
    that decides what each means."""
    found = []
    for path, tree in modules(inside_db=False):
        if str(path.relative_to(SOURCE)) in READS_A_DRIVER_ERROR_OUTSIDE_DB:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "errors":
                if getattr(node.value, "id", "") == "psycopg":
                    found.append(f"{where(path, node)} uses psycopg.errors")
            elif isinstance(node, ast.Attribute) and node.attr in DRIVER_ERROR_NAMES:
                if getattr(node.value, "id", "") == "psycopg":
                    found.append(f"{where(path, node)} uses psycopg.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("psycopg"):
                taken = {alias.name for alias in node.names} & DRIVER_ERROR_NAMES
                found += [f"{where(path, node)} imports {name}" for name in sorted(taken)]
    assert found == []
