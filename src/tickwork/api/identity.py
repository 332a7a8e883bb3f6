"""Routes: login, refresh, logout, the caller (profile, password, personal API tokens),
users and invites.

Refresh tokens travel in the JSON body for scripts, or - when the login asks for it, as the
dashboard does - in an HttpOnly, SameSite=Strict cookie scoped to the auth path (Secure when
served over HTTPS). A state change authenticated by that cookie must come from our own origin.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request, Response

from tickwork.api.contract import answer
from tickwork.api.inputs import IdPath
from tickwork.api.paths import mounted_at
from tickwork.api.schemas import (
    AcceptIn,
    ApiTokenCreatedOut,
    ApiTokenIn,
    ApiTokenOut,
    InviteCreatedOut,
    InviteIn,
    InviteOut,
    LoginIn,
    PasswordIn,
    RefreshIn,
    TokenOut,
    UserEditIn,
    UserOut,
)
from tickwork.api.security import Services, caller, client_address, services
from tickwork.auth import Principal, Role, TokenPair
from tickwork.errors import AuthError, PermissionDenied

router = APIRouter()

Svc = Annotated[Services, Depends(services)]
Caller = Annotated[Principal, Depends(caller)]

COOKIE = "tickwork_refresh"
CROSS_SITE = answer(403, "A refresh cookie sent without this server's own Origin")
COOKIE_PATH = "/api/auth"
"""The refresh cookie's path, below where the API is mounted (``/tickwork/api/auth``)."""


def _cookie_path(request: Request) -> str:
    return mounted_at(request.scope) + COOKIE_PATH


def _secure(request: Request, svc: Services) -> bool:
    public = svc.app.settings.api.public_url
    scheme = urlsplit(public).scheme if public else request.url.scheme
    return scheme == "https"


def _check_origin(request: Request, svc: Services) -> None:
    """A cookie-authenticated state change must come from a page of this server."""
    origin = request.headers.get("origin")
    allowed = {f"{request.url.scheme}://{request.url.netloc}"}
    public = svc.app.settings.api.public_url
    if public:
        parts = urlsplit(public)
        allowed.add(f"{parts.scheme}://{parts.netloc}")
    if origin is None or origin.rstrip("/") not in allowed:
        raise PermissionDenied(
            "same origin",
            f"origin {origin!r}",
            "a refresh cookie is only honoured on a request from this server's own pages"
            f" (Origin header {'missing' if origin is None else 'of another site'})",
        )


def _tokens(
    pair: TokenPair, request: Request, response: Response, svc: Services, cookie: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "access_token": pair.access_token,
        "expires_in": pair.expires_in,
        "user": pair.user,
    }
    if cookie:
        response.set_cookie(
            COOKIE,
            pair.refresh_token,
            max_age=int(svc.app.settings.auth.refresh_token_ttl),
            path=_cookie_path(request),
            httponly=True,
            secure=_secure(request, svc),
            samesite="strict",
        )
    else:
        body["refresh_token"] = pair.refresh_token
    return body


def _presented(body: RefreshIn | None, request: Request, svc: Services) -> tuple[str, bool]:
    """The refresh token of a request, and whether it came from the cookie."""
    if body is not None and body.refresh_token:
        return body.refresh_token, False
    token = request.cookies.get(COOKIE)
    if not token:
        raise AuthError("no refresh token (neither in the body nor in the cookie)")
    _check_origin(request, svc)
    return token, True


@router.post(
    "/api/auth/login",
    response_model=TokenOut,
    tags=["auth"],
    responses=answer(401, "Unknown email, wrong password or disabled user (all alike)")
    | answer(429, "Too many failed logins for this account or address"),
)
async def login(body: LoginIn, request: Request, response: Response, svc: Svc) -> dict[str, Any]:
    """Email and password for a short-lived access token and a refresh token. Unknown emails
    and wrong passwords answer alike; repeated failures are throttled (429)."""
    pair = await svc.auth.login(body.email, body.password, client_address(request))
    return _tokens(pair, request, response, svc, body.cookie)


@router.post(
    "/api/auth/refresh",
    response_model=TokenOut,
    tags=["auth"],
    responses=answer(401, "No refresh token, or one that is invalid, expired or used") | CROSS_SITE,
)
async def refresh(
    request: Request, response: Response, svc: Svc, body: RefreshIn | None = None
) -> dict[str, Any]:
    """Trade a refresh token for new tokens; the presented one is used up (rotation). Using a
    refresh token twice revokes every token descended from the same login."""
    token, from_cookie = _presented(body, request, svc)
    pair = await svc.auth.refresh(token)
    return _tokens(pair, request, response, svc, from_cookie)


@router.post("/api/auth/logout", status_code=204, tags=["auth"], responses=CROSS_SITE)
async def logout(request: Request, svc: Svc, body: RefreshIn | None = None) -> Response:
    """Revoke the refresh token (and its whole login)."""
    try:
        token, _ = _presented(body, request, svc)
    except AuthError:
        token = ""
    if token:
        await svc.auth.logout(token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path=_cookie_path(request))
    return response


@router.get("/api/me", response_model=UserOut, tags=["me"])
async def get_me(svc: Svc, who: Caller) -> Any:
    """The caller's profile."""
    return await svc.auth.get_user(who.user_id)


@router.post(
    "/api/me/password",
    status_code=204,
    tags=["me"],
    responses=answer(409, "The password changed meanwhile")
    | answer(429, "Too many failed logins for this account or address"),
)
async def change_password(body: PasswordIn, request: Request, svc: Svc, who: Caller) -> Response:
    """Change the caller's password; every refresh token of theirs is revoked. A wrong
    current password counts as a failed login (throttled alike, 429)."""
    await svc.auth.change_password(
        who.user_id, body.current_password, body.new_password, address=client_address(request)
    )
    return Response(status_code=204)


@router.get("/api/me/tokens", response_model=list[ApiTokenOut], tags=["me"])
async def list_api_tokens(svc: Svc, who: Caller) -> Any:
    """The caller's personal API tokens (never their secret)."""
    return await svc.auth.list_api_tokens(who.user_id)


@router.post(
    "/api/me/tokens",
    response_model=ApiTokenCreatedOut,
    status_code=201,
    tags=["me"],
    responses=answer(403, "A role above the caller's (or above the token making the call)"),
)
async def create_api_token(body: ApiTokenIn, svc: Svc, who: Caller) -> dict[str, Any]:
    """A personal API token for automation, shown once; its role is never above yours."""
    role = Role[body.role] if body.role else who.role
    token, secret = await svc.auth.create_api_token(
        who.user_id, body.name, role, body.expires_in, at_most=who.role
    )
    return {"api_token": token, "token": secret}


@router.delete(
    "/api/me/tokens/{token_id}",
    status_code=204,
    tags=["me"],
    responses=answer(404, "The caller has no API token with this id"),
)
async def revoke_api_token(token_id: IdPath, svc: Svc, who: Caller) -> Response:
    """Revoke one of the caller's API tokens."""
    await svc.auth.revoke_api_token(who.user_id, token_id)
    return Response(status_code=204)


@router.get("/api/users", response_model=list[UserOut], tags=["users"])
async def list_users(svc: Svc) -> Any:
    """Every user."""
    return await svc.auth.list_users()


@router.patch(
    "/api/users/{user_id}",
    response_model=UserOut,
    tags=["users"],
    responses=answer(404, "No user with this id")
    | answer(409, "It would leave no enabled administrator"),
)
async def edit_user(user_id: IdPath, body: UserEditIn, svc: Svc, who: Caller) -> Any:
    """Change a user's role or disable them; either revokes their refresh tokens at once.
    The caller must still be an enabled ADMIN when the change commits (checked again under a
    lock: a demotion racing this request wins or is seen), and nobody raises their own role
    or enables themselves (403)."""
    user = await svc.auth.get_user(user_id)
    if body.role is not None:
        user = await svc.auth.set_role(user_id, Role[body.role], who)
    if body.disabled is not None:
        user = await svc.auth.disable(user_id, who, disabled=body.disabled)
    return user


@router.get("/api/invites", response_model=list[InviteOut], tags=["users"])
async def list_invites(svc: Svc) -> Any:
    """Every invite, with whether it was accepted or revoked."""
    return await svc.auth.list_invites()


@router.post(
    "/api/invites",
    response_model=InviteCreatedOut,
    status_code=201,
    tags=["users"],
    responses=answer(409, "A user with this email exists"),
)
async def create_invite(body: InviteIn, svc: Svc, who: Caller) -> dict[str, Any]:
    """Invite someone with a fixed role; the token is shown once and expires."""
    invite, token = await svc.auth.create_invite(body.email, Role[body.role], who)
    return {"invite": invite, "token": token}


@router.delete(
    "/api/invites/{invite_id}",
    status_code=204,
    tags=["users"],
    responses=answer(404, "No invite with this id")
    | answer(409, "The invite was accepted already"),
)
async def revoke_invite(invite_id: IdPath, svc: Svc, who: Caller) -> Response:
    """Revoke an invite that was not accepted yet."""
    await svc.auth.revoke_invite(invite_id, who)
    return Response(status_code=204)


@router.post(
    "/api/invites/accept",
    response_model=UserOut,
    status_code=201,
    tags=["users"],
    responses=answer(401, "The invite token is invalid, used, revoked or expired")
    | answer(409, "A user with the invite's email exists"),
)
async def accept_invite(body: AcceptIn, svc: Svc) -> Any:
    """Become a user with an invite token (once); the role is the invite's."""
    return await svc.auth.accept_invite(body.token, body.name, body.password)
