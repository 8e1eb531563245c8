// Layouts from a phone to a wall screen (issue 43 item 1): every page at
// 390, 1,400 and 2,560 px wide, on a real daemon with a signed-in
// administrator and a finished MPI job (allpages.mjs). On each: the page
// never scrolls sideways (document scrollWidth <= the viewport's width);
// every control of the page lies on screen or inside a box that scrolls to
// it (nothing cut off by a box that clips); every header link and control
// is inside the window and the topmost thing at its centre, and each nav
// link, clicked, opens its page; a table wider than its box scrolls inside
// it with its first column kept in view; at 1,400 px the jobs table shows
// every column without scrolling. A screenshot of every page at every width
// goes to web/test-results/layout-WIDTH-PAGE.png.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { context, openPage, startAllPages } from "./allpages.mjs";
import { shot, startBrowser } from "./harness.mjs";

const WIDTHS = [390, 1400, 2560];

let all;
let browser;

/** What does not fit the window: the document's width, and every control
 * (link, button, input, select, summary) that sticks out of the window or
 * out of a box that clips it without scrolling. */
function overflow() {
  const vw = document.documentElement.clientWidth;
  const bad = [];
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden";
  };
  const describe = (el) => `${el.tagName.toLowerCase()}${el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : ""} "${(el.getAttribute("aria-label") || el.textContent || "").trim().slice(0, 40)}"`;
  for (const el of document.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]")) {
    if (!visible(el)) continue;
    const r = el.getBoundingClientRect();
    // Up to the first box that scrolls: it must not be clipped before.
    let anc = el.parentElement;
    let inScroller = false;
    for (; anc && anc !== document.body; anc = anc.parentElement) {
      const ox = getComputedStyle(anc).overflowX;
      if (ox === "visible") continue;
      const a = anc.getBoundingClientRect();
      if (ox === "auto" || ox === "scroll") {
        inScroller = true;
        break;
      }
      // hidden or clip: the control must be inside the box.
      if (r.left < a.left - 1 || r.right > a.right + 1) bad.push(`${describe(el)} cut off by ${describe(anc)} (${Math.round(r.left)}–${Math.round(r.right)} outside ${Math.round(a.left)}–${Math.round(a.right)})`);
    }
    if (!inScroller && (r.left < -1 || r.right > vw + 1)) bad.push(`${describe(el)} off screen (${Math.round(r.left)}–${Math.round(r.right)} of ${vw})`);
  }
  return { scrollWidth: document.documentElement.scrollWidth, width: vw, bad };
}

/** The header's links and controls shown, each with whether it lies in the
 * window and is the topmost element at its centre. */
function headerControls() {
  const vw = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll("header.top a[href], header.top button, header.top select, header.top input")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue; // hidden (another time mode, no session)
    const x = r.left + r.width / 2;
    const y = r.top + r.height / 2;
    const top = document.elementFromPoint(x, y);
    out.push({
      name: (el.getAttribute("aria-label") || el.textContent || "").trim(),
      inside: r.left >= 0 && r.right <= vw && r.top >= 0,
      topmost: !!top && (top === el || el.contains(top)),
    });
  }
  return out;
}

describe("layout at 390, 1,400 and 2,560 px", () => {
  before(async () => {
    all = await startAllPages();
    browser = await startBrowser();
  });
  after(async () => {
    await browser?.close();
    await all?.stop();
  });

  for (const width of WIDTHS) {
    it(`every page at ${width} px: no sideways scrolling, every control reachable, the header whole`, async (t) => {
      const ctx = await context(browser, all.daemon, { width });
      const out = await context(browser, all.daemon, { width, signedOut: true });
      try {
        const page = await ctx.newPage();
        const errors = [];
        page.on("pageerror", (e) => errors.push(e.message));
        for (const [name, path] of all.pages) {
          const p = name === "login" ? await out.newPage() : page;
          await openPage(p, all.daemon.base, path);
          const o = await p.evaluate(overflow);
          await shot(p, `layout-${width}-${name}`);
          t.diagnostic(`${width} px ${name}: document ${o.scrollWidth} px wide in a ${o.width} px window`);
          assert.ok(o.scrollWidth <= o.width, `${name} at ${width} px: the page is ${o.scrollWidth} px wide in a ${o.width} px window`);
          assert.deepEqual(o.bad, [], `${name} at ${width} px: controls out of reach`);
          const hc = await p.evaluate(headerControls);
          // Signed in: brand, the pages (six or more), three time modes, the zone, sign out, theme; signed out: brand and theme.
          assert.ok(hc.length >= (name === "login" ? 2 : 12), `${name} at ${width} px: header controls ${JSON.stringify(hc.map((c) => c.name))}`);
          for (const c of hc) {
            assert.ok(c.inside, `${name} at ${width} px: header control "${c.name}" is not inside the window`);
            assert.ok(c.topmost, `${name} at ${width} px: header control "${c.name}" is covered`);
          }
        }
        // Each page's link in the header opens it (a real click).
        await openPage(page, all.daemon.base, "/jobs?state=all");
        const keys = await page.locator("header.top .nav a[data-key]:visible").evaluateAll((as) => as.map((a) => a.dataset.key));
        assert.ok(keys.length >= 6, `nav links ${keys}`);
        for (const key of keys) {
          await page.locator(`header.top .nav a[data-key="${key}"]`).click();
          await page.waitForFunction((k) => location.pathname === `/${k}` && document.querySelector(`.nav a[data-key="${k}"]`)?.getAttribute("aria-current") === "page", key);
        }
        assert.deepEqual(errors, []);
      } finally {
        await ctx.close();
        await out.close();
      }
    });
  }

  it("a wide table scrolls inside its box with its first column in view; at 1,400 px the jobs table shows every column", async () => {
    for (const width of [390, 1400]) {
      const ctx = await context(browser, all.daemon, { width });
      try {
        const page = await ctx.newPage();
        await openPage(page, all.daemon.base, "/jobs?state=all");
        const wrap = page.locator(".table-wrap").first();
        const m = await wrap.evaluate((w) => ({ scroll: w.scrollWidth, client: w.clientWidth, ox: getComputedStyle(w).overflowX, cols: w.querySelectorAll("thead th").length }));
        assert.equal(m.ox, "auto");
        assert.ok(m.cols >= 12, `the jobs table has ${m.cols} columns`);
        if (width === 1400) {
          // The "cuts its Intra-node column": every column in view.
          assert.ok(m.scroll <= m.client, `jobs table at 1,400 px: ${m.scroll} px of columns in ${m.client} px`);
          const last = await page.locator(".table-wrap thead th").last().evaluate((th) => {
            const r = th.getBoundingClientRect();
            const w = th.closest(".table-wrap").getBoundingClientRect();
            return { right: r.right, wrapRight: w.right, text: th.textContent };
          });
          assert.ok(last.right <= last.wrapRight + 1, `the last column (${last.text}) ends at ${last.right}, its box at ${last.wrapRight}`);
          continue;
        }
        // 390 px: the table is wider than its box and scrolls inside it.
        assert.ok(m.scroll > m.client, `jobs table at 390 px: ${m.scroll} px in ${m.client} px`);
        const before = await page.evaluate(() => {
          const w = document.querySelector(".table-wrap");
          return { first: w.querySelector("tbody td").getBoundingClientRect().left, second: w.querySelectorAll("tbody td")[1].getBoundingClientRect().left, wrap: w.getBoundingClientRect().left };
        });
        await wrap.evaluate((w) => (w.scrollLeft = 200));
        const afterScroll = await page.evaluate(() => {
          const w = document.querySelector(".table-wrap");
          const td = w.querySelector("tbody td");
          const r = td.getBoundingClientRect();
          return { first: r.left, second: w.querySelectorAll("tbody td")[1].getBoundingClientRect().left, topmost: td.contains(document.elementFromPoint(r.left + 4, r.top + r.height / 2)), scrolled: w.scrollLeft };
        });
        assert.ok(afterScroll.scrolled > 0, "the table box scrolled");
        assert.equal(Math.round(afterScroll.first), Math.round(before.first), "the first column stays where it was");
        assert.ok(afterScroll.second < before.second - 100, `the other columns moved (${before.second} → ${afterScroll.second})`);
        assert.ok(afterScroll.topmost, "the first column is drawn over the columns scrolled under it");
        await shot(page, "layout-390-jobs-scrolled");
      } finally {
        await ctx.close();
      }
    }
  });
});
