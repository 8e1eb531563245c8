// A map a person can read (issue 43 item 3), against a real daemon on the
// synthetic fat tree (16 switches, 64 hosts): every switch is labelled at
// the default zoom, next to where it is drawn, no label covers another or is
// cut by the map's edge
// (the labels as the browser paints them, canvastext.mjs); the legend
// gives the utilization scale in numbers with the colours the map draws;
// the details sit in a panel beside the map that covers no node, the host
// at the canvas's bottom-left corner included, at 1,440 and at 390 px.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startBrowser, startDaemon, until } from "./harness.mjs";
import { canvasTexts, contrast, overlaps, recordCanvasText, rgb, sameColor } from "./canvastext.mjs";

// The utilization ramp's stops (web/src/map/colors.ts), as e2e.test.mjs
// knows its ends.
const STOPS = { 0: "rgb(203, 213, 225)", 25: "rgb(56, 189, 248)", 50: "rgb(250, 204, 21)", 75: "rgb(249, 115, 22)", 100: "rgb(220, 38, 38)" };

let daemon;
let browser;
let context;
let page;
const errors = [];
let nodes;
let layout;

before(async () => {
  daemon = await startDaemon({ sweeps: 3 });
  browser = await startBrowser();
  context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  await recordCanvasText(context);
  page = await context.newPage();
  page.on("pageerror", (e) => errors.push(e.message));
  nodes = (await daemon.api("/fabric/nodes")).nodes;
  layout = await daemon.api("/fabric/layout");
  if (typeof layout.level === "string") layout.level = Array.from(Buffer.from(layout.level, "base64")); // Go's []uint8
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
});

const firstFrame = () => page.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0 && window.__netloomMap?.updates > 0, null, { timeout: 20_000 });

/** Every node's position on the page (CSS pixels), from the renderer. */
async function nodePositions() {
  const r = await page.locator("#map").boundingBox();
  const pts = await page.evaluate(() => Array.from({ length: window.__netloomMap.nodes }, (_, i) => window.__netloomMap.screen(i)));
  return pts.map((p, i) => (p ? { i, x: r.x + p.x, y: r.y + p.y } : null)).filter(Boolean);
}

/** The labels painted on the map's label canvas, in page pixels. */
async function paintedLabels() {
  const [c] = await canvasTexts(page.locator("#map canvas.sigma-labels"));
  return c.texts.map((t) => ({ text: t.text, x0: c.left + t.x0 * c.sx, y0: c.top + t.y0 * c.sy, x1: c.left + t.x1 * c.sx, y1: c.top + t.y1 * c.sy }));
}

describe("map", () => {
  it("labels every switch at the default zoom, beside it, none over another", async () => {
    await page.goto(`${daemon.base}/network`);
    await firstFrame();
    const switches = nodes.filter((n) => n.type === "switch");
    assert.equal(switches.length, 16);
    const pos = await nodePositions();
    const labels = await until(async () => {
      const l = await paintedLabels();
      return switches.every((s) => l.some((t) => t.text === s.description)) ? l : false;
    }, "a label for every switch", 10_000);
    for (const s of switches) {
      const i = layout.guid.indexOf(s.guid);
      const p = pos.find((q) => q.i === i);
      const t = labels.find((l) => l.text === s.description);
      // Right of the node's mark (or left of it at the map's right edge), on its line.
      const beside = (t.x0 > p.x && t.x0 - p.x < 16) || (t.x1 < p.x && p.x - t.x1 < 16);
      assert.ok(beside && t.y0 < p.y + 2 && t.y1 > p.y - 8, `${s.description}'s label (${t.x0},${t.y0})-(${t.x1},${t.y1}) beside its node at (${p.x},${p.y})`);
    }
    assert.deepEqual(overlaps(labels), []);
    // None cut by the map's edges.
    const map = await page.locator("#map").boundingBox();
    for (const t of labels) assert.ok(t.x0 >= map.x - 1 && t.x1 <= map.x + map.width + 1 && t.y0 >= map.y - 1 && t.y1 <= map.y + map.height + 1, `label ${t.text} inside the map`);
    // Hosts (few nodes): labelled too, where there is room.
    const hostNames = new Set(layout.name.filter((_, i) => layout.level[i] === 0));
    assert.ok(labels.some((t) => hostNames.has(t.text)), "some host labelled");
  });

  it("gives the utilization scale in numbers, each with the colour the map draws", async () => {
    const steps = page.locator(".map-legend .util-step");
    assert.deepEqual(await steps.allInnerTexts(), ["0%", "25%", "50%", "75%", "100%"]);
    for (const [k, pct] of [0, 25, 50, 75, 100].entries()) {
      assert.equal(await steps.nth(k).locator(".swatch").evaluate((e) => getComputedStyle(e).backgroundColor), STOPS[pct], `${pct}%`);
    }
    // An idle direction on the map is drawn in the 0% colour.
    const idle = await page.evaluate(() => {
      const m = window.__netloomMap;
      const d = m.util.findIndex((q) => q === 0);
      return d < 0 ? null : m.edgeColors(d >> 1)[d & 1];
    });
    if (idle !== null) assert.equal(idle.replace(/,/g, ", "), STOPS[0]);
  });

  for (const [w, h, scheme] of [
    [1440, 900, "light"],
    [390, 844, "dark"],
  ]) {
    it(`puts the details in a panel that covers no node, the hovered node's label on the map's background (${w} px, ${scheme})`, async (t) => {
      await page.setViewportSize({ width: w, height: h });
      await page.emulateMedia({ colorScheme: scheme });
      await page.goto(`${daemon.base}/network`);
      await firstFrame();
      await page.waitForTimeout(300);
      const panel = await page.locator(".map-side").boundingBox();
      const details = await page.locator(".map-info").boundingBox();
      assert.ok(panel && details, "the panel is shown");
      const inside = (b, p, m = 4) => p.x > b.x - m && p.x < b.x + b.width + m && p.y > b.y - m && p.y < b.y + b.height + m;
      const pos = await nodePositions();
      assert.equal(pos.length, layout.guid.length, "every node drawn");
      assert.deepEqual(pos.filter((p) => inside(panel, p)).map((p) => layout.name[p.i]), []);
      // The node nearest the canvas's bottom-left corner (the old box's place), hovered: named in the panel, still uncovered.
      const map = await page.locator("#map").boundingBox();
      const corner = pos.reduce((a, b) => (Math.hypot(b.x - map.x, b.y - (map.y + map.height)) < Math.hypot(a.x - map.x, a.y - (map.y + map.height)) ? b : a));
      // Hovered (a host's mark is a few pixels: the pointer tries around its centre).
      const named = async () => (await page.locator(".map-info").innerText()).startsWith(`${layout.name[corner.i]} · `);
      let hovered = false;
      for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, -1], [1, -1], [-1, 1]]) {
        await page.mouse.move(corner.x + dx, corner.y + dy);
        await page.waitForTimeout(150);
        if ((hovered = await named())) break;
      }
      assert.ok(hovered, `the details of ${layout.name[corner.i]} in the panel (${await page.locator(".map-info").innerText()})`);
      const after = await page.locator(".map-side").boundingBox();
      assert.ok(!inside(after, corner), "the hovered node is not under the panel");
      // Its label as the hover canvas painted it: the theme's label colour
      // on a box of the map's background, at least 4.5:1 (the theme's own
      // colours, read from the page's styles, not the map's code).
      const [hc] = await canvasTexts(page.locator("#map canvas.sigma-hovers"));
      const want = await page.evaluate(() => {
        const probe = (v) => {
          const e = document.createElement("i");
          e.style.color = `var(${v})`;
          document.body.append(e);
          const c = getComputedStyle(e).color;
          e.remove();
          return c;
        };
        return { theme: document.documentElement.dataset.theme, label: probe("--map-label"), bg: probe("--map-bg") };
      });
      assert.equal(want.theme, scheme);
      const label = hc.texts.find((t) => t.text === layout.name[corner.i]);
      assert.ok(label, `the hover canvas names ${layout.name[corner.i]} (${hc.texts.map((t) => t.text)})`);
      assert.ok(sameColor(label.fill, want.label), `the label in the theme's label colour ${want.label} (${label.fill})`);
      assert.ok(hc.fills.length >= 1 && hc.fills.every((f) => sameColor(f, want.bg)), `the box under it in the map's background ${want.bg} (${hc.fills})`);
      const ratio = contrast(rgb(label.fill), rgb(hc.fills.at(-1)));
      t.diagnostic(`${scheme}: the hovered label ${label.fill} on ${hc.fills.at(-1)}, ${ratio.toFixed(2)}:1`);
      assert.ok(ratio >= 4.5, `the hovered label's contrast ${ratio.toFixed(2)}:1`);
      await page.mouse.move(0, 0);
      await page.emulateMedia({ colorScheme: "light" });
    });
  }

  it("no page errors", async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    assert.deepEqual(errors, []);
  });
});
