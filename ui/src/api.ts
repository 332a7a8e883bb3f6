// The one way the dashboard talks to the API: the access token kept in memory (never in
// storage a script could read later), renewed through the HttpOnly refresh cookie when it
// expires, and every error read as the API's problem detail.

export type Role = "VIEWER" | "OPERATOR" | "ADMIN";

/** The path the dashboard and its API are served under, from the page's
 * `<meta name="tickwork-base">` (written by the server): "" at a server's root, "/tickwork"
 * when an application mounts tickwork there. Anything but a plain absolute path counts as "". */
export function mountedAt(doc: Document): string {
  const meta = doc.querySelector<HTMLMetaElement>('meta[name="tickwork-base"]');
  const path = (meta?.content ?? "").replace(/\/+$/, "");
  return /^\/(?![/\\])[^?#\\]*$/.test(path) ? path : "";
}

/** Where this page is served from (see mountedAt); every API call and route is below it. */
export const BASE = mountedAt(document);

export interface Problem {
  status: number;
  title: string;
  detail?: string;
  /** The request field at fault, when one is. */
  field?: string | null;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail || problem.title);
  }
}

export interface User {
  id: number;
  email: string;
  name?: string | null;
  role: Role;
}

interface TokenAnswer {
  access_token: string;
  expires_in: number;
  user: User;
}

let accessToken: string | null = null;
/** Set while this browser holds a refresh cookie (which scripts cannot see): without it, a
 * page load does not ask to refresh a session that does not exist. Not a secret. */
const SIGNED_IN = "tickwork.signed-in";
let refreshing: Promise<User | null> | null = null;
const listeners = new Set<(user: User | null) => void>();

/** Told when the session starts, is renewed or ends (an expired one: back to sign-in). */
export function onSession(listener: (user: User | null) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function announce(user: User | null): void {
  for (const listener of listeners) listener(user);
}

async function problemOf(answer: Response): Promise<Problem> {
  try {
    const body = await answer.json();
    if (body && typeof body.title === "string") return body as Problem;
  } catch {
    // not JSON: fall through
  }
  return { status: answer.status, title: answer.statusText || `HTTP ${answer.status}` };
}

/** Sign in: the refresh token goes into the HttpOnly cookie, the access token stays here. */
export async function login(email: string, password: string): Promise<User> {
  const answer = await fetch(BASE + "/api/auth/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ email, password, cookie: true }),
    credentials: "same-origin",
  });
  if (!answer.ok) throw new ApiError(answer.status, await problemOf(answer));
  const tokens = (await answer.json()) as TokenAnswer;
  accessToken = tokens.access_token;
  localStorage.setItem(SIGNED_IN, "1");
  announce(tokens.user);
  return tokens.user;
}

/** A new access token from the refresh cookie; null when there is no live session. */
export function refresh(): Promise<User | null> {
  if (localStorage.getItem(SIGNED_IN) === null) return Promise.resolve(null);
  refreshing ??= (async () => {
    try {
      const answer = await fetch(BASE + "/api/auth/refresh", {
        method: "POST",
        credentials: "same-origin",
      });
      if (!answer.ok) {
        accessToken = null;
        localStorage.removeItem(SIGNED_IN);
        return null;
      }
      const tokens = (await answer.json()) as TokenAnswer;
      accessToken = tokens.access_token;
      return tokens.user;
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

/** Sign out: the server revokes the refresh token's whole login and clears the cookie. */
export async function logout(): Promise<void> {
  try {
    await fetch(BASE + "/api/auth/logout", { method: "POST", credentials: "same-origin" });
  } finally {
    accessToken = null;
    localStorage.removeItem(SIGNED_IN);
    announce(null);
  }
}

/** Forget the session here (an expired refresh: the server has nothing left to revoke). */
export function endSession(): void {
  accessToken = null;
  localStorage.removeItem(SIGNED_IN);
  announce(null);
}

/** A call to the API as the signed-in user; one renewal and retry on a 401. */
export async function api<T>(path: string, init: RequestInit = {}, retried = false): Promise<T> {
  const headers = new Headers(init.headers);
  if (accessToken) headers.set("Authorization", `Bearer ${accessToken}`);
  if (init.body !== undefined) headers.set("Content-Type", "application/json");
  const answer = await fetch(BASE + path, { ...init, headers, credentials: "same-origin" });
  if (answer.status === 401 && !retried) {
    const user = await refresh();
    if (user) return api<T>(path, init, true);
    endSession();
  }
  if (!answer.ok) throw new ApiError(answer.status, await problemOf(answer));
  if (answer.status === 204) return undefined as T;
  return (await answer.json()) as T;
}

export const post = <T>(path: string, body?: unknown): Promise<T> =>
  api<T>(path, { method: "POST", body: body === undefined ? undefined : JSON.stringify(body) });

/** One server-sent event of GET /api/events. */
export interface ServerEvent {
  kind: string;
  data: Record<string, unknown>;
}

/** Read GET /api/events (with the access token in its header, which EventSource cannot
 * send) until it ends, the signal aborts it, or the session ends; each event to ``onEvent``.
 * Resolves when the stream ended; rejects on a refusal (401 after a renewal, 403, 503). */
export async function readEvents(
  onEvent: (event: ServerEvent) => void,
  signal: AbortSignal,
  onOpen: () => void,
): Promise<void> {
  const headers = new Headers({ Accept: "text/event-stream" });
  if (accessToken) headers.set("Authorization", `Bearer ${accessToken}`);
  let answer = await fetch(BASE + "/api/events", { headers, signal, credentials: "same-origin" });
  if (answer.status === 401 && (await refresh())) {
    headers.set("Authorization", `Bearer ${accessToken}`);
    answer = await fetch(BASE + "/api/events", { headers, signal, credentials: "same-origin" });
  }
  if (!answer.ok || !answer.body) throw new ApiError(answer.status, await problemOf(answer));
  onOpen();
  const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue; // a comment (keepalive) or the retry hint
      onEvent({ kind, data: JSON.parse(data) as Record<string, unknown> });
    }
  }
}
