"""How a pydantic model's JSON Schema says what its validation does, where pydantic's own
schema is looser: an edit's fields may be left out, but only some may be sent as null."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

__all__ = ["null_only"]


def null_only(nullable: Collection[str]) -> Callable[[dict[str, Any]], None]:
    """For ``json_schema_extra`` of an edit whose fields are typed ``T | None = None`` (so
    that each may be left out) and whose validation refuses null for all but ``nullable``:
    the others are written as ``T``, without their null default."""

    def rewrite(schema: dict[str, Any]) -> None:
        for name, field in schema["properties"].items():
            if name in nullable or {"type": "null"} not in field.get("anyOf", []):
                continue
            values = [v for v in field.pop("anyOf") if v != {"type": "null"}]
            if field.get("default", ...) is None:
                field.pop("default")
            if len(values) == 1:
                field.update(values[0])
            else:
                field["anyOf"] = values

    return rewrite
