// A sortable, paged table. Sorting is by column key; the sort and page
// live in the URL (sort=key, dir=asc|desc, page=N) so a view can be shared.
import { h } from "./dom";
import { plural } from "./format";
import { setQuery } from "./router";

export interface Column<T> {
  key: string;
  label: string;
  value: (row: T) => number | string;
  cell?: (row: T) => Node | string;
  numeric?: boolean;
  title?: string;
}

export interface TableOptions<T> {
  columns: Column<T>[];
  rows: T[];
  defaultSort: string;
  defaultDir?: "asc" | "desc";
  pageSize?: number;
  rowClass?: (row: T) => string;
  empty: string;
  /** Prefix of the URL parameters, for pages with several tables. */
  param?: string;
  label: string;
}

export function table<T>(opt: TableOptions<T>): HTMLElement {
  const p = opt.param ?? "";
  const q = new URLSearchParams(location.search);
  let sortKey = q.get(p + "sort") ?? opt.defaultSort;
  if (!opt.columns.some((c) => c.key === sortKey)) sortKey = opt.defaultSort;
  let dir: "asc" | "desc" = (q.get(p + "dir") as "asc" | "desc" | null) ?? opt.defaultDir ?? "desc";
  let page = Math.max(0, Number(q.get(p + "page") ?? 1) - 1) || 0;
  const pageSize = opt.pageSize ?? 50;
  const wrap = h("div", { class: "table-wrap" });

  const draw = () => {
    const col = opt.columns.find((c) => c.key === sortKey) ?? opt.columns[0]!;
    const rows = [...opt.rows].sort((a, b) => {
      const x = col.value(a);
      const y = col.value(b);
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
      return dir === "asc" ? c : -c;
    });
    const pages = Math.max(1, Math.ceil(rows.length / pageSize));
    page = Math.min(page, pages - 1);
    const shown = rows.slice(page * pageSize, (page + 1) * pageSize);
    const head = h(
      "tr",
      {},
      ...opt.columns.map((c) => {
        const active = c.key === sortKey;
        return h(
          "th",
          { class: c.numeric ? "num" : "", "aria-sort": active ? (dir === "asc" ? "ascending" : "descending") : "none", scope: "col", title: c.title },
          h(
            "button",
            {
              type: "button",
              class: "sort",
              "data-key": c.key,
              onclick: () => {
                if (sortKey === c.key) dir = dir === "asc" ? "desc" : "asc";
                else {
                  sortKey = c.key;
                  dir = c.numeric ? "desc" : "asc";
                }
                page = 0;
                save();
                draw();
                (wrap.querySelector(`button.sort[data-key="${c.key}"]`) as HTMLButtonElement | null)?.focus();
              },
            },
            c.label,
            h("span", { class: "arrow", "aria-hidden": "true" }, active ? (dir === "asc" ? "▲" : "▼") : ""),
          ),
        );
      }),
    );
    const body = shown.length
      ? shown.map((r) => h("tr", { class: opt.rowClass?.(r) ?? "" }, ...opt.columns.map((c) => h("td", { class: c.numeric ? "num" : "" }, c.cell ? c.cell(r) : String(c.value(r))))))
      : [h("tr", {}, h("td", { colspan: opt.columns.length, class: "empty-row" }, opt.empty))];
    const pager =
      pages > 1
        ? h(
            "div",
            { class: "pager" },
            h("button", { type: "button", class: "btn", disabled: page === 0, onclick: () => ((page = Math.max(0, page - 1)), save(), draw()) }, "‹ Previous"),
            h("span", {}, `Page ${page + 1} of ${pages} · ${plural(rows.length, "row")}`),
            h("button", { type: "button", class: "btn", disabled: page >= pages - 1, onclick: () => ((page = Math.min(pages - 1, page + 1)), save(), draw()) }, "Next ›"),
          )
        : h("div", { class: "pager" }, h("span", {}, plural(rows.length, "row")));
    wrap.replaceChildren(h("table", { class: "data", "aria-label": opt.label }, h("thead", {}, head), h("tbody", {}, ...body)), pager);
  };
  const save = () => {
    const s = new URLSearchParams(location.search);
    s.set(p + "sort", sortKey);
    s.set(p + "dir", dir);
    if (page > 0) s.set(p + "page", String(page + 1));
    else s.delete(p + "page");
    setQuery(s);
  };
  draw();
  return wrap;
}
