"""``tickwork users``: create users, list them, change their role or password, disable them,
straight on the database without the HTTP API.

The commands call :class:`~tickwork.auth.AuthService`, as the API does, so the same rules
(password policy, hashing, sessions ending) and audit events apply; the audit trail names the
actor ``cli:<login name>``. ``list --json`` prints the API's response model
(:class:`tickwork.api.schemas.UserOut`).
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from psycopg_pool import AsyncConnectionPool

from tickwork.app import App
from tickwork.auth import AuthService, User
from tickwork.auth.service import GENERATED_PASSWORD_BYTES
from tickwork.cli.common import (
    AppOption,
    Group,
    JsonOption,
    cli_actor,
    print_json,
    print_table,
    run_with_pool,
    utc_time,
)
from tickwork.errors import NotFoundError

__all__ = ["users_cli"]

T = TypeVar("T")

UserKey = Annotated[str, typer.Argument(metavar="EMAIL_OR_ID", help="The user's email or id.")]

users_cli = typer.Typer(
    help="Create users, list them, change their role or password, disable them.",
    no_args_is_help=True,
    cls=Group,
)


def _run_auth(app: str | None, work: Callable[[AuthService], Awaitable[T]]) -> T:
    """:func:`~tickwork.cli.common.run_with_pool` with a started :class:`AuthService`."""

    async def with_auth(the_app: App, pool: AsyncConnectionPool[Any]) -> T:
        auth = AuthService(pool, the_app.db.store, the_app.settings.auth)
        await auth.start()
        return await work(auth)

    return run_with_pool(app, with_auth)


async def _find_user(auth: AuthService, email_or_id: str) -> User:
    """A user by id (all digits) or by email in any case."""
    if email_or_id.isdigit():
        return await auth.get_user(int(email_or_id))
    wanted = email_or_id.strip().lower()
    for user in await auth.list_users():
        if user.email.lower() == wanted:
            return user
    raise NotFoundError("user", email_or_id)


@users_cli.command("create")
def users_create(
    email: str,
    role: Annotated[str, typer.Option("--role", "-r", help="VIEWER, OPERATOR or ADMIN.")],
    name: Annotated[str, typer.Option("--name", help="Display name.")] = "",
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin", help="Read the password from standard input (else one is made)."
        ),
    ] = False,
    app: AppOption = None,
) -> None:
    """Create a user. Without --password-stdin a random password is printed, once."""
    generated = None
    if password_stdin:
        password = sys.stdin.read().rstrip(
            "\r\n"
        )  # the line end is the shell's, not the password's
    else:
        generated = password = secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
    actor = cli_actor()
    user = _run_auth(
        app, lambda auth: auth.create_user(email, password, role, name=name, actor=actor)
    )
    typer.echo(f"created user {user.id}: {user.email} ({user.role.name})")
    if generated is not None:
        typer.echo(f"password (shown once; store it now): {generated}")


@users_cli.command("list")
def users_list(as_json: JsonOption = False, app: AppOption = None) -> None:
    """Every user, oldest first."""
    from tickwork.api.schemas import UserOut

    users = _run_auth(app, lambda auth: auth.list_users())
    if as_json:
        print_json([UserOut.model_validate(u).model_dump(mode="json") for u in users])
        return
    print_table(
        "users",
        ("id", "email", "name", "role", "state", "created (UTC)", "last login (UTC)"),
        (
            (
                str(u.id),
                u.email,
                u.name or "-",
                u.role.name,
                "disabled" if u.disabled else "enabled",
                utc_time(u.created_at),
                utc_time(u.last_login_at),
            )
            for u in users
        ),
    )


@users_cli.command("set-role")
def users_set_role(
    email_or_id: UserKey,
    role: Annotated[str, typer.Argument(metavar="ROLE", help="VIEWER, OPERATOR or ADMIN.")],
    app: AppOption = None,
) -> None:
    """Change a user's role; their sessions end, so they log in again."""
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.set_role(user.id, role, actor)

    user = _run_auth(app, change)
    typer.echo(f"user {user.id} ({user.email}) is now {user.role.name}")


@users_cli.command("set-password")
def users_set_password(email_or_id: UserKey, app: AppOption = None) -> None:
    """Set a user's password, read from standard input: typed without echo at a terminal,
    else its first line. The same policy as a change through the API; their sessions end."""
    if sys.stdin.isatty():
        password: str = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")  # the line end is the shell's
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.set_password(user.id, password, actor)

    user = _run_auth(app, change)
    typer.echo(f"password of user {user.id} ({user.email}) set; their sessions have ended")


@users_cli.command("disable")
def users_disable(
    email_or_id: UserKey,
    enable: Annotated[
        bool, typer.Option("--enable", help="Enable the user again instead.")
    ] = False,
    app: AppOption = None,
) -> None:
    """Disable a user: no login, their sessions end and their API tokens stop working."""
    actor = cli_actor()

    async def change(auth: AuthService) -> User:
        user = await _find_user(auth, email_or_id)
        return await auth.disable(user.id, actor, disabled=not enable)

    user = _run_auth(app, change)
    typer.echo(f"user {user.id} ({user.email}) is {'disabled' if user.disabled else 'enabled'}")
