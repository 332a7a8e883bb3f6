"""``tickwork definitions``: operator-stored HTTP and script jobs, listed and changed straight
on the database (the same operations as ``/api/definitions``).

A definition is given as a JSON file (``-`` for stdin) in the shape of the API's request
body; changes are audited with the actor ``cli:<login name>``. A definition is named by its
name or its id.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    YesOption,
    cli_actor,
    print_json,
    print_table,
    run_with_pool,
)
from tickwork.errors import ConfigError
from tickwork.limits import MAX_JSON_BYTES

__all__ = ["definitions_cli"]

definitions_cli = typer.Typer(
    help="List, create, edit, pause, resume, run and delete HTTP and script definitions.",
    cls=Group,
)

FileArgument = Annotated[
    str, typer.Argument(help="A JSON file with the definition's fields ('-': stdin).")
]


def _read_object(source: str) -> dict[str, Any]:
    """The JSON object in ``source`` (a path, or ``-`` for stdin), at most 1 MiB."""
    try:
        if source == "-":
            text = sys.stdin.read(MAX_JSON_BYTES + 1)
        else:
            with Path(source).open(encoding="utf-8") as file:
                text = file.read(MAX_JSON_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"definition file ({source}): {exc}") from None
    if len(text) > MAX_JSON_BYTES:
        raise ConfigError(f"definition file ({source}): larger than {MAX_JSON_BYTES:,} bytes")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ConfigError(f"definition file ({source}) is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"definition file ({source}) must hold a JSON object")
    return value


def _dump(definition: Any) -> dict[str, Any]:
    from tickwork.api.schemas import DefinitionOut

    return DefinitionOut.model_validate(definition).model_dump(mode="json")


@definitions_cli.command("list")
def definitions_list(app: AppOption = None, as_json: JsonOption = False) -> None:
    """Every definition, by id."""
    from tickwork.definitions import admin
    from tickwork.queue.admin import MAX_PAGE

    async def every(the_app: Any, pool: Any) -> list[Any]:
        found: list[Any] = []
        after = 0
        while True:
            items, after_next = await admin.page(
                pool, the_app.db.store, after=after, limit=MAX_PAGE
            )
            found.extend(items)
            if after_next is None:
                return found
            after = after_next

    stored = run_with_pool(app, every)
    if as_json:
        print_json([_dump(d) for d in stored])
        return
    print_table(
        "definitions",
        ("id", "name", "kind", "queue", "cron", "state", "version"),
        (
            (
                str(d.id),
                d.name,
                d.kind,
                d.queue,
                d.cron or "-",
                "enabled" if d.enabled else "paused",
                str(d.version),
            )
            for d in stored
        ),
    )


@definitions_cli.command("show")
def definitions_show(key: str, app: AppOption = None) -> None:
    """One definition as JSON."""
    from tickwork.definitions import admin

    async def one(the_app: Any, pool: Any) -> Any:
        store = the_app.db.store
        return await admin.get(pool, store, await admin.find(pool, store, key))

    print_json(_dump(run_with_pool(app, one)))


@definitions_cli.command("create")
def definitions_create(source: FileArgument, app: AppOption = None) -> None:
    """Store a new definition from a JSON file."""
    from tickwork.definitions import admin

    given = _read_object(source)
    actor = cli_actor()
    created = run_with_pool(
        app,
        lambda the_app, pool: admin.create(
            pool,
            the_app.db.store,
            given,
            actor=actor,
            min_interval=the_app.settings.scheduler.min_interval,
        ),
    )
    typer.echo(f"created definition {created.id} ({created.name}), runs on queue {created.queue}")


@definitions_cli.command("edit")
def definitions_edit(key: str, source: FileArgument, app: AppOption = None) -> None:
    """Change the fields a JSON file gives; the others stay (the next run uses the edit)."""
    from tickwork.definitions import admin

    changes = _read_object(source)
    actor = cli_actor()

    async def change(the_app: Any, pool: Any) -> Any:
        store = the_app.db.store
        found = await admin.find(pool, store, key)
        return await admin.edit(
            pool,
            store,
            found,
            changes,
            actor=actor,
            min_interval=the_app.settings.scheduler.min_interval,
        )

    edited = run_with_pool(app, change)
    typer.echo(f"edited definition {edited.id} ({edited.name}), now version {edited.version}")


def _set_enabled(app: str | None, key: str, enabled: bool) -> None:
    from tickwork.definitions import admin

    actor = cli_actor()

    async def change(the_app: Any, pool: Any) -> Any:
        store = the_app.db.store
        found = await admin.find(pool, store, key)
        return await admin.set_enabled(pool, store, found, enabled, actor=actor)

    changed = run_with_pool(app, change)
    typer.echo(f"{'resumed' if enabled else 'paused'} definition {changed.id} ({changed.name})")


@definitions_cli.command("pause")
def definitions_pause(key: str, app: AppOption = None) -> None:
    """Pause a definition: no scheduled runs, webhooks refused (run it now still works)."""
    _set_enabled(app, key, False)


@definitions_cli.command("resume")
def definitions_resume(key: str, app: AppOption = None) -> None:
    """Resume a paused definition (its schedule goes on from its next fire time)."""
    _set_enabled(app, key, True)


@definitions_cli.command("run")
def definitions_run(key: str, app: AppOption = None) -> None:
    """Enqueue one run now, with the definition as it is."""
    from tickwork.definitions import admin

    actor = cli_actor()

    async def run(the_app: Any, pool: Any) -> int:
        store = the_app.db.store
        return await admin.run_now(pool, store, await admin.find(pool, store, key), actor=actor)

    typer.echo(f"enqueued job {run_with_pool(app, run)} for definition {key}")


@definitions_cli.command("delete")
def definitions_delete(key: str, yes: YesOption = False, app: AppOption = None) -> None:
    """Delete a definition and its schedule; its runs stay as jobs. Asks to confirm unless
    --yes."""
    from tickwork.definitions import admin

    actor = cli_actor()

    async def look(the_app: Any, pool: Any) -> Any:
        store = the_app.db.store
        return await admin.get(pool, store, await admin.find(pool, store, key))

    if not yes:
        found = run_with_pool(app, look)
        typer.confirm(
            f"Delete definition {found.name} ({found.kind}) and its schedule? Its runs stay"
            " as jobs.",
            abort=True,
        )

    async def drop(the_app: Any, pool: Any) -> None:
        store = the_app.db.store
        await admin.delete(pool, store, await admin.find(pool, store, key), actor=actor)

    run_with_pool(app, drop)
    typer.echo(f"deleted definition {key}")


@definitions_cli.command("webhook")
def definitions_webhook(
    key: str,
    app: AppOption = None,
    remove: Annotated[
        bool, typer.Option("--remove", help="Remove the webhook: its token stops working.")
    ] = False,
) -> None:
    """Give a definition a webhook with a new token (printed once; an earlier token stops
    working), or remove it."""
    from tickwork.definitions import admin

    actor = cli_actor()

    async def change(the_app: Any, pool: Any) -> str | None:
        store = the_app.db.store
        found = await admin.find(pool, store, key)
        if remove:
            await admin.remove_webhook(pool, store, found, actor=actor)
            return None
        token = await admin.set_webhook(pool, store, found, actor=actor)
        return admin.webhook_path(found, token)

    path = run_with_pool(app, change)
    if path is None:
        typer.echo(f"removed the webhook of definition {key}")
    else:
        typer.echo(f"POST {path}  (shown once; the token is not stored)")
