// Client-side routing: the History API and one render function per page.
// A page gets a fresh container and an AbortSignal that fires when the user
// navigates away, so its fetches, timers and streams stop. Before a page
// renders, the app's guard decides whether the visitor may see it (signed
// in; an administrator for fabric pages) and names the page to show if not.
// The pages and who may see them are listed in routes.ts.

export interface PageContext {
  root: HTMLElement;
  params: Record<string, string>;
  search: URLSearchParams;
  signal: AbortSignal;
}

export type Page = (ctx: PageContext) => void | Promise<void>;

/** Who may see a page: anyone (the login page), anyone signed in, or
 * administrators only (the fabric). */
export type Access = "public" | "signed-in" | "admin";

/** The guard's answer: render the page, or this page instead (login,
 * "only administrators"), or go to this address. */
export type Verdict = { ok: true } | { ok: false; page: Page } | { ok: false; href: string };

interface Route {
  pattern: RegExp;
  names: string[];
  page: Page;
  nav: string;
  access: Access;
}

const routes: Route[] = [];
let current: AbortController | null = null;
let mount: HTMLElement | null = null;
let onChange: (nav: string) => void = () => {};
let guard: (access: Access) => Verdict = () => ({ ok: true });
let home: () => string = () => "/network";

export function route(path: string, nav: string, page: Page, access: Access = "signed-in"): void {
  const names: string[] = [];
  const pattern = new RegExp(
    "^" +
      path.replace(/\{(\w+)\}/g, (_, n: string) => {
        names.push(n);
        return "([^/]+)";
      }) +
      "/?$",
  );
  routes.push({ pattern, names, page, nav, access });
}

export interface StartOptions {
  /** Called with the nav key of the page shown ("" for none). */
  changed: (nav: string) => void;
  guard: (access: Access) => Verdict;
  /** Where "/" leads. */
  home: () => string;
}

export function start(root: HTMLElement, opt: StartOptions): void {
  mount = root;
  onChange = opt.changed;
  guard = opt.guard;
  home = opt.home;
  window.addEventListener("popstate", () => void render());
  document.addEventListener("click", (e) => {
    const a = (e.target as Element | null)?.closest?.("a[data-nav]") as HTMLAnchorElement | null;
    if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(a.getAttribute("href") ?? "/");
  });
  void render();
}

/** Replaces the current address (a page the visitor may not see yet, a
 * login that expired) and renders it; before start() only the address
 * changes, and start() renders it. */
export function redirect(href: string): void {
  history.replaceState(null, "", href);
  if (mount) void render();
}

export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  void render();
  // A new page starts at its top (a link low on the job page opens the
  // link page at its head); a changed view of the same page stays put.
  if (!replace) window.scrollTo(0, 0);
}

/** Changes the query string without re-rendering the page (view state). */
export function setQuery(search: URLSearchParams): void {
  const q = search.toString();
  history.replaceState(null, "", location.pathname + (q ? "?" + q : ""));
}

export async function render(): Promise<void> {
  if (!mount) return;
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  let path = location.pathname;
  if (path === "/" || path === "") {
    const to = home();
    history.replaceState(null, "", to + location.search);
    path = to;
  }
  for (const r of routes) {
    const m = r.pattern.exec(path);
    if (!m) continue;
    const verdict = guard(r.access);
    if (!verdict.ok && "href" in verdict) {
      redirect(verdict.href);
      return;
    }
    const page = verdict.ok ? r.page : verdict.page;
    const params: Record<string, string> = {};
    r.names.forEach((n, i) => (params[n] = decodeURIComponent(m[i + 1] ?? "")));
    const root = document.createElement("div");
    root.className = "page";
    mount.replaceChildren(root);
    onChange(verdict.ok ? r.nav : "");
    try {
      await page({ root, params, search: new URLSearchParams(location.search), signal: ctl.signal });
    } catch (err) {
      if (ctl.signal.aborted) return;
      const box = document.createElement("div");
      box.className = "state error";
      box.setAttribute("role", "alert");
      box.textContent = err instanceof Error ? err.message : String(err);
      root.replaceChildren(box);
    }
    return;
  }
  onChange("");
  const nf = document.createElement("div");
  nf.className = "state empty";
  nf.textContent = `No page at ${path}.`;
  mount.replaceChildren(nf);
}
