// Accessibility basics and the colour themes (issue 43 items 7 and 8), on
// every page of a real daemon with a signed-in administrator and a finished
// MPI job (allpages.mjs):
// - every control has an accessible name, as Chromium computes it (the
//   accessibility tree over CDP): buttons, links, text fields, selects,
//   check boxes, images; every canvas is an image with a name or lies
//   inside one, or is a chart's, named by its figure's caption;
// - the map's text alternative: the map is an image named after what it
//   shows, and its table view lists every node and link of /fabric/nodes
//   and /fabric/links with the utilization of /fabric/utilization at the
//   same past time;
// - text contrast (WCAG 2 relative luminance, text over the background it
//   is drawn on) of every piece of text on every page, the text painted on
//   canvases (charts' axes, per-rank profiles, the map's labels) included,
//   in the light and the dark theme: at least 4.5:1;
// - the theme follows the system's setting, the header's switch overrides
//   it and is remembered across a reload (localStorage), and the map's and
//   charts' colours (--map-*, --chart-*) change with it;
// - keyboard focus is visible: Tab goes through every control of the
//   header, each showing an outline at least 2 px wide with 3:1 contrast
//   against the header.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { context, openPage, startAllPages } from "./allpages.mjs";
import { recordCanvasText } from "./canvastext.mjs";
import { shot, startBrowser, until } from "./harness.mjs";

let all;
let browser;

/** Roles of controls and images that must have a name. */
const NAMED = new Set(["button", "link", "textbox", "searchbox", "combobox", "listbox", "checkbox", "radio", "spinbutton", "slider", "switch", "tab", "menuitem", "image", "img", "Canvas", "DisclosureTriangle"]);

/** The controls and images in the accessibility tree without a name. */
async function unnamed(cdp) {
  const { nodes } = await cdp.send("Accessibility.getFullAXTree");
  const out = [];
  for (const n of nodes) {
    if (n.ignored || !NAMED.has(n.role?.value) || (n.name?.value ?? "").trim()) continue;
    let html = "?";
    if (n.backendDOMNodeId) {
      const { object } = await cdp.send("DOM.resolveNode", { backendNodeId: n.backendDOMNodeId });
      // A canvas inside a named image (the map) is what that name speaks for;
      // a chart's canvas is what its figure's caption names (its legend gives
      // the values in numbers).
      const r = await cdp.send("Runtime.callFunctionOn", {
        objectId: object.objectId,
        functionDeclaration:
          "function () { const f = this.closest('figure'); const cap = f && Array.from(f.children).find((c) => c.tagName === 'FIGCAPTION'); return this.tagName === 'CANVAS' && (this.parentElement?.closest(\"[role='img'][aria-label]\") || (cap && cap.textContent.trim())) ? '' : this.outerHTML.slice(0, 160); }",
        returnByValue: true,
      });
      html = r.result.value;
      if (html === "") continue;
    }
    out.push(`${n.role.value}: ${html}`);
  }
  return out;
}

/** Every canvas and img not inside something hidden from assistive
 * technology, with whether it has a text alternative: an img's alt, or an
 * image role with a name on itself or an ancestor. */
function imagesWithoutText() {
  const out = [];
  for (const el of document.querySelectorAll("canvas, img, svg")) {
    if (el.closest("[aria-hidden='true']") || el.getClientRects().length === 0) continue;
    if (el.tagName === "IMG" && el.hasAttribute("alt")) continue;
    const img = el.closest("[role='img']");
    if (img && (img.getAttribute("aria-label") || img.getAttribute("aria-labelledby"))) continue;
    // A chart's canvas: its figure's caption names it, its legend gives the values.
    const fig = el.closest("figure");
    const cap = fig && Array.from(fig.children).find((c) => c.tagName === "FIGCAPTION");
    if (el.tagName === "CANVAS" && cap && cap.textContent.trim()) continue;
    out.push(`${el.tagName.toLowerCase()} in ${el.parentElement?.className || el.parentElement?.tagName}`);
  }
  return out;
}

/** Every visible piece of text with its colour's contrast against what it is
 * drawn on, grouped as header, button, link, table cell, body text. */
function contrasts() {
  const parse = (c) => {
    const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c);
    if (hex) return [...hex.slice(1).map((x) => parseInt(x, 16)), 1];
    const m = /rgba?\(([^)]+)\)/.exec(c);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [r, g, b, a];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat(1);
  };
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  /** WCAG 2's contrast ratio of ink (opaque, already composited) on bg. */
  const ratio = (ink, bg) => {
    const [l1, l2] = [lum(ink), lum(bg)].sort((a, b) => b - a);
    return (l1 + 0.05) / (l2 + 0.05);
  };
  const rgbText = (c) => `rgb(${c.slice(0, 3).map(Math.round).join(", ")})`;
  const classes = (el) => String(el.className).trim().split(/\s+/).join(".");
  /** The colour behind el: its and its ancestors' backgrounds, composited
   * over the page's; null over an image or gradient (not measurable). */
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.backgroundImage !== "none") return null;
      const c = parse(s.backgroundColor);
      if (c && c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    let bg = [255, 255, 255, 1];
    for (const c of layers.reverse()) bg = over(c, bg);
    return bg;
  };
  const opacity = (el) => {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const kind = (el) =>
    el.closest("header.top, .chrome") ? "header" : el.closest("button, .btn, select, .seg, summary") ? "button" : el.closest("a[href]") ? "link" : el.closest("td, th") ? "table cell" : "body text";
  const out = [];
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const el = t.parentElement;
    if (!el || seen.has(el) || !t.textContent.trim() || el.getClientRects().length === 0) continue;
    seen.add(el);
    const s = getComputedStyle(el);
    if (s.visibility === "hidden" || el.closest("[aria-hidden='true'], option, script, style")) continue;
    // Disabled controls are exempt (WCAG 1.4.3).
    if (el.closest("button:disabled, select:disabled, input:disabled, [aria-disabled='true']")) continue;
    const bg = background(el);
    const fg = parse(s.color);
    if (!bg || !fg) continue;
    const o = opacity(el);
    out.push({ kind: kind(el), ratio: ratio(over([fg[0], fg[1], fg[2], fg[3] * o], bg), bg), text: t.textContent.trim().slice(0, 40), where: `${el.tagName.toLowerCase()}.${classes(el)}`, fg: s.color, bg: rgbText(bg) });
  }
  // What the canvases painted as text (canvastext.mjs: each string with
  // its fillStyle) against what the canvas lies on: the charts' axes, the
  // per-rank profiles, the map's labels.
  for (const c of document.querySelectorAll("canvas")) {
    if (!c.__texts?.length || c.getClientRects().length === 0) continue;
    const bg = background(c);
    if (!bg) continue;
    for (const x of c.__texts) {
      const fg = parse(x.fill);
      if (!fg || !x.text.trim()) continue;
      out.push({ kind: "canvas text", ratio: ratio(over(fg, bg), bg), text: x.text.slice(0, 40), where: `canvas.${classes(c)}`, fg: x.fill, bg: rgbText(bg) });
    }
  }
  return out;
}

describe("accessibility and themes", () => {
  before(async () => {
    all = await startAllPages();
    browser = await startBrowser();
  });
  after(async () => {
    await browser?.close();
    await all?.stop();
  });

  it("every control and image has a name; every canvas a text alternative", async () => {
    const ctx = await context(browser, all.daemon, { width: 1400 });
    const out = await context(browser, all.daemon, { width: 1400, signedOut: true });
    try {
      for (const [name, path] of all.pages) {
        const page = await (name === "login" ? out : ctx).newPage();
        const cdp = await page.context().newCDPSession(page);
        await openPage(page, all.daemon.base, path);
        if (name === "network") await page.locator("details.map-table > summary").click();
        assert.deepEqual(await unnamed(cdp), [], `${name}: controls or images without a name`);
        assert.deepEqual(await page.evaluate(imagesWithoutText), [], `${name}: canvases or images without a text alternative`);
        await page.close();
      }
    } finally {
      await ctx.close();
      await out.close();
    }
  });

  it("the map's table view lists every node and link with the utilization the API gives", async () => {
    const nodes = (await all.daemon.api("/fabric/nodes")).nodes;
    const links = (await all.daemon.api("/fabric/links")).links;
    // A past time (the last sweep's, rounded up): the map and the API's
    // answer are of the same sweep once every sweep up to it is written: a
    // sweep taken in the same second (500 ms apart) could otherwise answer
    // the page and not the test, or the other way round (31% against 32%).
    const at = Math.ceil((await all.daemon.api("/fabric/utilization")).time);
    await until(async () => (await all.daemon.api("/fabric/utilization")).time > at + 1, "two sweeps past the time asked for", 30_000, all.daemon);
    const layout = await all.daemon.api(`/fabric/layout?at=${at}`);
    const ctx = await context(browser, all.daemon, { width: 1400 });
    try {
      const page = await ctx.newPage();
      await openPage(page, all.daemon.base, `/network?at=${at}`);
      const map = page.locator("#map");
      assert.equal(await map.getAttribute("role"), "img");
      const switches = nodes.filter((n) => n.type === "switch").length;
      assert.equal(await map.getAttribute("aria-label"), `Network map of ${switches} switches, ${nodes.length - switches} hosts and ${links.length} links; the table view under the map lists them`);
      await page.locator("details.map-table > summary").click();
      // The API's answer for that time, asked as the page asked it.
      const util = await all.daemon.api(`/fabric/utilization?at=${at}`);
      await page.locator(".map-table-note", { hasText: `sweep ${util.sweep}` }).waitFor();
      // Every node on the table's pages: GUID, LID and kind as /fabric/nodes has them.
      const readAll = async (label) => {
        const rows = [];
        const box = page.locator(".table-wrap", { has: page.locator(`table[aria-label="${label}"]`) });
        for (;;) {
          rows.push(...(await box.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)))));
          const next = box.locator(".pager button", { hasText: "Next" });
          if ((await next.count()) === 0 || (await next.isDisabled())) return rows;
          const first = rows.at(-1)[0];
          await next.click();
          await page.waitForFunction(([l, f]) => document.querySelector(`table[aria-label="${l}"] tbody tr:last-child td`)?.textContent !== f, [label, first]);
        }
      };
      const nodeRows = await readAll("Nodes of the map");
      assert.equal(nodeRows.length, nodes.length);
      const byGuid = new Map(nodeRows.map((r) => [r[2], r]));
      for (const n of nodes) {
        const r = byGuid.get(n.guid);
        assert.ok(r, `node ${n.description} (${n.guid}) in the table`);
        // The map's name of the node (the layout's: a host's first word).
        assert.equal(r[0], layout.name[layout.guid.indexOf(n.guid)]);
        assert.ok(n.description.startsWith(r[0]), `${r[0]} is how ${n.description} begins`);
        assert.equal(Number(r[3]), n.lid);
        assert.equal(r[1].startsWith("switch"), n.type === "switch");
      }
      // Every link, with each direction's utilization of that sweep (the
      // API's quantized 0..254 byte per direction, in the layout's order).
      const q = Buffer.from(util.util, "base64");
      const ports = Buffer.from(layout.ports, "base64");
      const linkRows = await readAll("Links of the map");
      assert.equal(linkRows.length, links.length);
      const byName = new Map(linkRows.map((r) => [r[0], r]));
      // As the pages write a percentage (format.ts's pct).
      const pct = (b) => (b === 255 ? "no data" : b / 2.54 >= 10 ? `${(b / 2.54).toFixed(0)}%` : `${(b / 2.54).toFixed(1)}%`);
      for (let j = 0; j < layout.edges.length / 2; j++) {
        const a = layout.edges[2 * j];
        const b = layout.edges[2 * j + 1];
        const name = `${layout.name[a]}:${ports[2 * j]} ↔ ${layout.name[b]}:${ports[2 * j + 1]}`;
        const r = byName.get(name);
        assert.ok(r, `link ${name} in the table`);
        assert.equal(r[1], pct(q[2 * j]), `${name} →`);
        assert.equal(r[2], pct(q[2 * j + 1]), `${name} ←`);
      }
      await shot(page, "a11y-map-table");
    } finally {
      await ctx.close();
    }
  });

  for (const scheme of ["light", "dark"]) {
    it(`text contrast of every page in the ${scheme} theme is at least 4.5:1`, async (t) => {
      const ctx = await context(browser, all.daemon, { width: 1400, colorScheme: scheme });
      const out = await context(browser, all.daemon, { width: 1400, colorScheme: scheme, signedOut: true });
      await recordCanvasText(ctx);
      const worst = {};
      const bad = [];
      try {
        for (const [name, path] of all.pages) {
          const page = await (name === "login" ? out : ctx).newPage();
          await openPage(page, all.daemon.base, path);
          assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), scheme, "the theme follows the system's setting");
          for (const c of await page.evaluate(contrasts)) {
            if (!worst[c.kind] || c.ratio < worst[c.kind].ratio) worst[c.kind] = { ...c, page: name };
            if (c.ratio < 4.5) bad.push(`${name}: ${c.kind} "${c.text}" (${c.where}) ${c.fg} on ${c.bg}: ${c.ratio.toFixed(2)}:1`);
          }
          await shot(page, `theme-${scheme}-${name}`);
          await page.close();
        }
      } finally {
        await ctx.close();
        await out.close();
      }
      for (const [k, w] of Object.entries(worst)) t.diagnostic(`${scheme}: lowest ${k} contrast ${w.ratio.toFixed(2)}:1 ("${w.text}" on the ${w.page} page, ${w.fg} on ${w.bg})`);
      for (const k of ["header", "button", "link", "table cell", "body text", "canvas text"]) assert.ok(worst[k], `no ${k} measured in the ${scheme} theme`);
      assert.deepEqual(bad, [], `text under 4.5:1 in the ${scheme} theme`);
    });
  }

  it("the header's switch overrides the system's setting, is remembered, and the map's and charts' colours follow", async () => {
    const ctx = await context(browser, all.daemon, { width: 1400, colorScheme: "light" });
    try {
      const page = await ctx.newPage();
      await openPage(page, all.daemon.base, "/jobs?state=all");
      const vars = () => page.evaluate(() => ["theme", "--bg", "--ink", "--map-bg", "--map-label", "--chart-axis"].map((v) => (v === "theme" ? document.documentElement.dataset.theme : getComputedStyle(document.documentElement).getPropertyValue(v).trim())));
      const light = await vars();
      assert.equal(light[0], "light");
      const sw = page.getByRole("combobox", { name: "Colour theme" });
      assert.match(await sw.getAttribute("title"), /as the system.s \(light now\)/);
      assert.equal(await sw.inputValue(), "system");
      // The system turns dark: the page follows at once (no reload).
      await page.emulateMedia({ colorScheme: "dark" });
      await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
      const dark = await vars();
      for (let i = 1; i < light.length; i++) assert.notEqual(dark[i], light[i], `variable ${i} changes with the theme`);
      // The switch: Light wins over the dark system, and survives a reload.
      await sw.selectOption("light");
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
      assert.equal(await page.evaluate(() => localStorage.getItem("netloom.theme")), "light");
      await page.reload();
      await openPage(page, all.daemon.base, "/jobs?state=all");
      assert.deepEqual(await vars(), light);
      assert.equal(await sw.inputValue(), "light");
      // Dark on a light system; then System again forgets the choice.
      await page.emulateMedia({ colorScheme: "light" });
      await sw.selectOption("dark");
      assert.deepEqual(await vars(), dark);
      await sw.selectOption("system");
      assert.equal(await page.evaluate(() => localStorage.getItem("netloom.theme")), null);
      assert.deepEqual(await vars(), light);
    } finally {
      await ctx.close();
    }
  });

  it("Tab goes through every control of the header, each with a visible focus outline", async () => {
    const ctx = await context(browser, all.daemon, { width: 1400 });
    try {
      const page = await ctx.newPage();
      await openPage(page, all.daemon.base, "/jobs?state=all");
      const controls = await page.evaluate(() =>
        [...document.querySelectorAll("header.top a[href], header.top button, header.top select, header.top input")].filter((e) => e.getClientRects().length > 0).length,
      );
      const reached = [];
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press("Tab");
        const f = await page.evaluate(() => {
          const el = document.activeElement;
          if (!el || !el.closest("header.top")) return null;
          const s = getComputedStyle(el);
          const rgb = (c) => c.match(/[\d.]+/g).slice(0, 3).map(Number);
          const lum = (c) => {
            const [r, g, b] = rgb(c).map((v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
            return 0.2126 * r + 0.7152 * g + 0.0722 * b;
          };
          const bar = getComputedStyle(el.closest("header.top")).backgroundColor;
          const [l1, l2] = [lum(s.outlineColor), lum(bar)].sort((a, b) => b - a);
          return { name: (el.getAttribute("aria-label") || el.textContent || "").trim(), style: s.outlineStyle, width: parseFloat(s.outlineWidth), contrast: (l1 + 0.05) / (l2 + 0.05), visible: el.matches(":focus-visible") };
        });
        if (!f) {
          if (reached.length) break;
          continue;
        }
        reached.push(f.name);
        assert.ok(f.visible, `${f.name}: :focus-visible`);
        assert.notEqual(f.style, "none", `${f.name}: an outline`);
        assert.ok(f.width >= 2, `${f.name}: outline ${f.width}px`);
        assert.ok(f.contrast >= 3, `${f.name}: outline contrast ${f.contrast.toFixed(2)}:1 against the header`);
      }
      assert.equal(reached.length, controls, `Tab reached ${JSON.stringify(reached)} of ${controls} header controls`);
      await shot(page, "a11y-focus");
    } finally {
      await ctx.close();
    }
  });
});
