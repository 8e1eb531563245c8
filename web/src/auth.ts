// Signing in and out (POST /api/v1/auth/login, /auth/logout) and asking
// who is signed in (GET /auth/me). The session itself (user, role, CSRF
// token) is kept by api.ts, which every request goes through.
import { ApiError, post, request, setSession } from "./api";
import type { Session } from "./api";

/** Asks the daemon who this browser is. Resolves null when nobody is
 * signed in (401). A daemon without the auth endpoints (404: built before
 * access control) lets everyone see everything, which is what an
 * anonymous administrator means. */
export async function loadSession(): Promise<Session | null> {
  try {
    const s = await request<Session>("GET", "/auth/me", { noLoginRedirect: true });
    setSession(s);
    return s;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      setSession(null);
      return null;
    }
    if (err instanceof ApiError && err.status === 404) {
      const s: Session = { user: "anonymous", role: "admin", method: "anonymous" };
      setSession(s);
      return s;
    }
    throw err;
  }
}

/** Signs in; rejects with an ApiError (401 bad_login, 429 too many
 * attempts) that the login page explains. */
export async function login(user: string, password: string): Promise<Session> {
  const s = await post<Session>("/auth/login", { user, password }, { noLoginRedirect: true });
  setSession(s);
  return s;
}

/** Signs out (the CSRF token goes with it, as with every POST). The
 * session is forgotten here too once the daemon has ended it. */
export async function logout(): Promise<void> {
  try {
    await post<void>("/auth/logout", undefined, { noLoginRedirect: true });
  } catch (err) {
    // 401: the session had already ended; anything else (a refused CSRF
    // token, the daemon gone) leaves the login in place, so say so.
    if (!(err instanceof ApiError && err.status === 401)) throw err;
  }
  setSession(null);
}

/** Whether a sign-out button makes sense: anonymous access has no session
 * to end, and a reverse proxy's login is ended at the proxy. */
export function canSignOut(s: Session | null): boolean {
  return !!s && s.method !== "anonymous" && s.method !== "proxy";
}

/** The page to go to after signing in: the ?next= path when it stays on
 * this site, else home. Only same-origin paths: "//evil.example",
 * "https://evil.example" and "/\\evil.example" all fall back to home. */
export function safeNext(raw: string | null, home: string): string {
  if (!raw || !raw.startsWith("/") || raw.startsWith("//") || raw.startsWith("/\\")) return home;
  let u: URL;
  try {
    u = new URL(raw, location.origin);
  } catch {
    return home;
  }
  if (u.origin !== location.origin || u.pathname.startsWith("/login") || u.pathname.startsWith("/api/")) return home;
  return u.pathname + u.search + u.hash;
}
