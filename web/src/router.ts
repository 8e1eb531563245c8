// Client-side routing: the History API and one render function per page.
// A page gets a fresh container and an AbortSignal that fires when the user
// navigates away, so its fetches, timers and streams stop.

export interface PageContext {
  root: HTMLElement;
  params: Record<string, string>;
  search: URLSearchParams;
  signal: AbortSignal;
}

export type Page = (ctx: PageContext) => void | Promise<void>;

interface Route {
  pattern: RegExp;
  names: string[];
  page: Page;
  nav: string;
}

const routes: Route[] = [];
let current: AbortController | null = null;
let mount: HTMLElement;
let onChange: (nav: string) => void = () => {};

export function route(path: string, nav: string, page: Page): void {
  const names: string[] = [];
  const pattern = new RegExp(
    "^" +
      path.replace(/\{(\w+)\}/g, (_, n: string) => {
        names.push(n);
        return "([^/]+)";
      }) +
      "/?$",
  );
  routes.push({ pattern, names, page, nav });
}

export function start(root: HTMLElement, changed: (nav: string) => void): void {
  mount = root;
  onChange = changed;
  window.addEventListener("popstate", () => void render());
  document.addEventListener("click", (e) => {
    const a = (e.target as Element | null)?.closest?.("a[data-nav]") as HTMLAnchorElement | null;
    if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(a.getAttribute("href") ?? "/");
  });
  void render();
}

export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  void render();
}

/** Changes the query string without re-rendering the page (view state). */
export function setQuery(search: URLSearchParams): void {
  const q = search.toString();
  history.replaceState(null, "", location.pathname + (q ? "?" + q : ""));
}

export async function render(): Promise<void> {
  current?.abort();
  const ctl = new AbortController();
  current = ctl;
  let path = location.pathname;
  if (path === "/" || path === "") {
    history.replaceState(null, "", "/network" + location.search);
    path = "/network";
  }
  for (const r of routes) {
    const m = r.pattern.exec(path);
    if (!m) continue;
    const params: Record<string, string> = {};
    r.names.forEach((n, i) => (params[n] = decodeURIComponent(m[i + 1] ?? "")));
    const root = document.createElement("div");
    root.className = "page";
    mount.replaceChildren(root);
    onChange(r.nav);
    try {
      await r.page({ root, params, search: new URLSearchParams(location.search), signal: ctl.signal });
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
