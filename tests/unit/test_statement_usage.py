"""Every named statement in ``sql/*.sql`` is used, and every name the code asks for exists."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import tickwork
from tickwork.db.statements import _raw

SOURCE = Path(tickwork.__file__).parent
RUNNERS = frozenset(
    {
        "run_named",
        "_q",
        "_query",
        "_execute",
        "_execute_tuples",
        "_execute_with_retry",
        "_transition",
        "_fetch",
    }
)
"""Helpers that take a statement's name as an argument."""
NAME = re.compile(r"^[a-z]+(_[a-z0-9]+)+$")


def literals() -> Iterator[tuple[Path, ast.AST, str]]:
    """Every string literal of the package's code."""
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path, node, node.value


def asked_for() -> Iterator[tuple[str, str]]:
    """(where, name) of each statement name the code looks up: ``...statements["name"]`` or a
    runner called with the name."""
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(SOURCE)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                target = node.value
                name = (
                    target.attr
                    if isinstance(target, ast.Attribute)
                    else (target.id if isinstance(target, ast.Name) else "")
                )
                if name.endswith("statements") and isinstance(node.slice.value, str):
                    yield where, node.slice.value
            elif isinstance(node, ast.Call):
                func = node.func
                called = (
                    func.attr
                    if isinstance(func, ast.Attribute)
                    else (func.id if isinstance(func, ast.Name) else "")
                )
                if called in RUNNERS:
                    for arg in node.args:
                        value = arg.value if isinstance(arg, ast.Constant) else None
                        if isinstance(value, str) and NAME.match(value):
                            yield where, value


def test_every_statement_is_used_by_the_code() -> None:
    used = {value for _, _, value in literals()}
    assert sorted(set(_raw()) - used) == []


def test_every_statement_the_code_asks_for_exists() -> None:
    found = list(asked_for())
    assert len(found) > 100  # the lookups are really seen
    assert [(where, name) for where, name in found if name not in _raw()] == []
