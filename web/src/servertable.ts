// A table sorted and paged by the server: the page asks for one page of
// rows in the chosen order and gets the total back. Sort and page live in
// the URL (sort=key, dir=asc|desc, page=N) as in table.ts, so a view can be
// shared. The table keeps its last rows on screen while the next page loads
// and reserves the height of a full page, so nothing jumps.
import { h } from "./dom";
import { setQuery } from "./router";

export interface ServerColumn<T> {
  /** The server's sort key, or undefined for a column that cannot sort. */
  key: string;
  sort?: string;
  label: string;
  cell: (row: T) => Node | string;
  numeric?: boolean;
  title?: string;
}

export interface ServerPage<T> {
  rows: T[];
  total: number;
}

export interface ServerTableOptions<T> {
  label: string;
  columns: ServerColumn<T>[];
  defaultSort: string;
  defaultDir?: "asc" | "desc";
  pageSize?: number;
  empty: string;
  rowKey: (row: T) => string;
  fetch: (q: { sort: string; dir: "asc" | "desc"; offset: number; limit: number }, signal: AbortSignal) => Promise<ServerPage<T>>;
  signal: AbortSignal;
}

export interface ServerTable {
  el: HTMLElement;
  /** Fetches the current page again (live refresh); rejects on error. */
  reload: () => Promise<void>;
}

export function serverTable<T>(opt: ServerTableOptions<T>): ServerTable {
  const q = new URLSearchParams(location.search);
  const sortable = opt.columns.filter((c) => c.sort);
  let sortCol = opt.columns.find((c) => c.key === q.get("sort") && c.sort) ?? opt.columns.find((c) => c.key === opt.defaultSort)!;
  let dir: "asc" | "desc" = q.get("dir") === "asc" ? "asc" : q.get("dir") === "desc" ? "desc" : (opt.defaultDir ?? "desc");
  let page = Math.max(0, (Number(q.get("page")) || 1) - 1);
  const pageSize = opt.pageSize ?? 25;
  let rows: T[] | null = null;
  let total = 0;
  let seq = 0;
  let inflight: AbortController | null = null;

  const wrap = h("div", { class: "table-wrap server-table", "aria-busy": "true" });
  const tableEl = h("table", { class: "data", "aria-label": opt.label });
  const thead = h("thead");
  const tbody = h("tbody");
  const pager = h("div", { class: "pager" });
  tableEl.append(thead, tbody);
  wrap.append(tableEl, pager);

  const drawHead = () => {
    thead.replaceChildren(
      h(
        "tr",
        {},
        ...opt.columns.map((c) => {
          const active = c === sortCol;
          const cls = c.numeric ? "num" : "";
          if (!c.sort) return h("th", { class: cls, scope: "col", title: c.title }, c.label);
          return h(
            "th",
            { class: cls, scope: "col", title: c.title, "aria-sort": active ? (dir === "asc" ? "ascending" : "descending") : "none" },
            h(
              "button",
              {
                type: "button",
                class: "sort",
                "data-key": c.key,
                onclick: () => {
                  if (sortCol === c) dir = dir === "asc" ? "desc" : "asc";
                  else {
                    sortCol = c;
                    dir = c.numeric ? "desc" : "asc";
                  }
                  page = 0;
                  save();
                  drawHead();
                  (thead.querySelector(`button.sort[data-key="${c.key}"]`) as HTMLButtonElement | null)?.focus();
                  void load().catch(() => {});
                },
              },
              c.label,
              h("span", { class: "arrow", "aria-hidden": "true" }, active ? (dir === "asc" ? "▲" : "▼") : ""),
            ),
          );
        }),
      ),
    );
  };

  const drawBody = () => {
    if (rows === null) {
      // First load: a full page of placeholder rows keeps the height.
      tbody.replaceChildren(
        ...Array.from({ length: Math.min(pageSize, 8) }, (_, i) =>
          h("tr", { class: "placeholder" }, h("td", { colspan: opt.columns.length }, i === 0 ? "Loading…" : "\u00a0")),
        ),
      );
      return;
    }
    tbody.replaceChildren(
      ...(rows.length
        ? rows.map((r) => h("tr", { "data-key": opt.rowKey(r) }, ...opt.columns.map((c) => h("td", { class: c.numeric ? "num" : "" }, c.cell(r)))))
        : [h("tr", {}, h("td", { colspan: opt.columns.length, class: "empty-row" }, opt.empty))]),
    );
    const pages = Math.max(1, Math.ceil(total / pageSize));
    const first = total === 0 ? 0 : page * pageSize + 1;
    const last = Math.min(total, (page + 1) * pageSize);
    pager.replaceChildren(
      h("span", {}, total ? `${first}–${last} of ${total}` : "0 rows"),
      h("button", { type: "button", class: "btn", disabled: page === 0, onclick: () => go(page - 1) }, "‹ Previous"),
      h("span", { class: "page-of" }, `Page ${page + 1} of ${pages}`),
      h("button", { type: "button", class: "btn", disabled: page >= pages - 1, onclick: () => go(page + 1) }, "Next ›"),
    );
  };

  const go = (p: number) => {
    page = Math.max(0, p);
    save();
    void load().catch(() => {});
  };

  const save = () => {
    const s = new URLSearchParams(location.search);
    s.set("sort", sortCol.key);
    s.set("dir", dir);
    if (page > 0) s.set("page", String(page + 1));
    else s.delete("page");
    setQuery(s);
  };

  const load = async (): Promise<void> => {
    const my = ++seq;
    inflight?.abort();
    const ctl = new AbortController();
    inflight = ctl;
    const stop = () => ctl.abort();
    opt.signal.addEventListener("abort", stop);
    wrap.setAttribute("aria-busy", "true");
    try {
      const r = await opt.fetch({ sort: sortCol.sort!, dir, offset: page * pageSize, limit: pageSize }, ctl.signal);
      if (my !== seq) return;
      // Past the end (rows went away): show the last page instead.
      if (r.rows.length === 0 && r.total > 0 && page > 0) {
        page = Math.floor((r.total - 1) / pageSize);
        save();
        return load();
      }
      rows = r.rows;
      total = r.total;
      wrap.dataset.total = String(total);
      wrap.dataset.sort = sortCol.sort!;
      wrap.dataset.dir = dir;
      drawBody();
    } catch (err) {
      if (ctl.signal.aborted) return;
      throw err;
    } finally {
      opt.signal.removeEventListener("abort", stop);
      if (my === seq) wrap.setAttribute("aria-busy", "false");
    }
  };

  if (!sortable.includes(sortCol)) sortCol = sortable[0]!;
  drawHead();
  drawBody();
  return { el: wrap, reload: load };
}
