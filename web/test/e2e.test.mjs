// End-to-end tests of the web UI against a real daemon on a simulated
// fat tree: every page renders its data, navigation and sorting work, live
// colours arrive, time travel shows older data. Screenshots of every page
// go to test-results/.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newPage, shot, startBrowser, startDaemon } from "./harness.mjs";

let daemon;
let browser;
let page;
const errors = [];
let startedAt;
let switchLink;
let aSwitch;

before(async () => {
  daemon = await startDaemon();
  startedAt = (await daemon.api("/status")).time;
  browser = await startBrowser();
  page = await newPage(browser, errors);
  const links = (await daemon.api("/fabric/links")).links;
  const nodes = (await daemon.api("/fabric/nodes")).nodes;
  const type = new Map(nodes.map((n) => [n.guid, n.type]));
  switchLink = links.find((l) => type.get(l.a.guid) === "switch" && type.get(l.b.guid) === "switch");
  aSwitch = nodes.find((n) => n.type === "switch");
  assert.ok(switchLink && aSwitch, "the fabric has switch-to-switch links");
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
});

const firstFrame = () => page.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0, null, { timeout: 20_000 });

describe("network map", () => {
  it("draws the whole fabric and marks the first frame", async () => {
    await page.goto(`${daemon.base}/`);
    await firstFrame();
    assert.equal(new URL(page.url()).pathname, "/network");
    const layout = await daemon.api("/fabric/layout");
    const m = await page.evaluate(() => ({ nodes: window.__netloomMap.nodes, links: window.__netloomMap.links }));
    assert.equal(m.nodes, layout.guid.length);
    assert.equal(m.links, layout.edges.length / 2);
    assert.ok(layout.compute_ms >= 0);
    assert.equal(await page.locator("canvas").count() > 0, true);
  });

  it("recolours links as sweeps arrive over the live stream", async () => {
    const before = await page.evaluate(() => ({ updates: window.__netloomMap.updates, sweep: window.__netloomMap.sweep, util: Array.from(window.__netloomMap.util), colors: window.__netloomMap.edgeColors(0) }));
    await page.waitForFunction((u) => window.__netloomMap.updates >= u + 2, before.updates, { timeout: 10_000 });
    const afterState = await page.evaluate(() => {
      const m = window.__netloomMap;
      const colors = [];
      for (let j = 0; j < m.links; j++) colors.push(m.edgeColors(j).join("/"));
      return { sweep: m.sweep, util: Array.from(m.util), colors };
    });
    assert.ok(afterState.sweep > before.sweep, `sweep ${afterState.sweep} after ${before.sweep}`);
    assert.notDeepEqual(afterState.util, before.util, "utilization changed between sweeps");
    assert.ok(afterState.util.some((q) => q !== 255), "some link directions are measured");
    assert.ok(new Set(afterState.colors).size > 3, "links have several colours");
    await shot(page, "network");
  });

  it("finds a node by name and keeps it in the URL", async () => {
    await page.fill("input.map-search", "n7");
    await page.locator(".search-results button", { hasText: "n7" }).first().waitFor();
    await page.press("input.map-search", "Enter");
    await page.waitForFunction(() => new URLSearchParams(location.search).has("node"));
    const guid = new URL(page.url()).searchParams.get("node");
    const node = await daemon.api(`/nodes/${guid}`);
    assert.match(node.node.description, /^n7\b/);
    await page.fill("input.map-search", String(aSwitch.lid));
    await page.locator(".search-results button").first().waitFor();
    assert.match(await page.locator(".search-results button").first().innerText(), new RegExp(`LID ${aSwitch.lid}\\b`));
  });
});

describe("pages", () => {
  it("link page shows both directions, charts and routes", async () => {
    await page.goto(`${daemon.base}/links/${switchLink.id}`);
    await page.locator(".card .metric-label", { hasText: "Utilization" }).first().waitFor();
    // The two direction cards at the top (the traffic-by-job panel below has cards of its own).
    assert.equal(await page.locator(".page-head + .cards > .card").count(), 2);
    await page.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4, null, { timeout: 10_000 });
    const points = await page.locator("figure.chart").first().getAttribute("data-points");
    assert.ok(Number(points) >= 2, `traffic chart has ${points} points`);
    await page.locator(".route-dir table tbody tr").first().waitFor();
    const routeText = await page.locator(".route-dir h3").first().innerText();
    assert.match(routeText, /\d+ routes/);
    await shot(page, "link");
  });

  it("node page lists ports and sorts them", async () => {
    await page.goto(`${daemon.base}/nodes/${aSwitch.guid}`);
    await page.locator("table.data tbody tr").first().waitFor();
    assert.equal(await page.locator("h1").innerText(), aSwitch.description);
    assert.equal(await page.locator("table.data tbody tr").count(), aSwitch.ports);
    await page.click('button.sort[data-key="out"]');
    assert.equal(await page.locator('th:has(button[data-key="out"])').getAttribute("aria-sort"), "descending");
    assert.equal(new URL(page.url()).searchParams.get("sort"), "out");
    const cells = await page.locator("table.data tbody tr td:nth-child(4)").allInnerTexts();
    const bytes = (s) => {
      const m = /([\d.]+) (B|KB|MB|GB|TB)/.exec(s);
      return m ? Number(m[1]) * 1000 ** ["B", "KB", "MB", "GB", "TB"].indexOf(m[2]) : -1;
    };
    for (let i = 1; i < cells.length; i++) assert.ok(bytes(cells[i - 1]) >= bytes(cells[i]), `sorted: ${cells[i - 1]} >= ${cells[i]}`);
    await page.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4, null, { timeout: 10_000 });
    await shot(page, "node");
    // Navigation: a peer link leads to another node page.
    await page.locator("table.data tbody tr td:nth-child(2) a").first().click();
    await page.waitForFunction((g) => !location.pathname.endsWith(g) && location.pathname.startsWith("/nodes/"), aSwitch.guid);
  });

  it("errors page lists ports with rising error counters", async () => {
    await page.goto(`${daemon.base}/network`);
    await firstFrame();
    await page.click('nav.nav a[data-key="errors"]');
    await page.locator("h1", { hasText: "Errors" }).waitFor();
    await page.locator("table.data").waitFor();
    const api = await daemon.api("/fabric/errors?from=-1h");
    const rows = await page.locator("table.data tbody tr").count();
    if (api.total === 0) assert.equal(await page.locator(".empty-row").count(), 1);
    else assert.equal(rows, Math.min(api.total, 50));
    await shot(page, "errors");
  });

  it("events page shows the discovery and filters by kind", async () => {
    await page.click('nav.nav a[data-key="events"]');
    await page.locator("table.data tbody tr td .badge").first().waitFor();
    assert.match(await page.locator("table.data tbody").innerText(), /fabric discovered/);
    await shot(page, "events");
    await page.selectOption("#event-kind", "link_down");
    await page.waitForFunction(() => location.search.includes("kind=link_down"));
    await page.locator(".empty-row").waitFor();
  });
});

describe("time travel", () => {
  it("shows older data at an earlier time", async () => {
    // Before the daemon started there is no fabric and no event.
    const t0 = Math.floor(new Date(startedAt).getTime() / 1000);
    await page.goto(`${daemon.base}/events?from=${t0 - 3600}&to=${t0 - 60}`);
    await page.locator(".empty-row").waitFor();
    assert.match(await page.locator(".empty-row").innerText(), /No events/);
    assert.equal(await page.locator('.seg[data-mode="range"]').getAttribute("aria-pressed"), "true");

    // A range that ended a few seconds ago holds fewer samples than live.
    const cut = Math.floor(Date.now() / 1000);
    await page.waitForTimeout(3000);
    await page.goto(`${daemon.base}/links/${switchLink.id}?from=${t0 - 5}&to=${cut}`);
    await page.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4);
    const past = Number(await page.locator("figure.chart").first().getAttribute("data-points"));
    await page.click('.seg[data-mode="live"]');
    await page.waitForFunction(() => !location.search.includes("from="));
    await page.waitForFunction((p) => Number(document.querySelector("figure.chart")?.getAttribute("data-points")) > p, past, { timeout: 10_000 });

    // The map at a past time is drawn from stored samples, not the stream.
    await page.goto(`${daemon.base}/network?at=${cut}`);
    await firstFrame();
    await page.waitForFunction(() => window.__netloomMap.updates >= 1);
    const stats = await page.locator(".map-stats").innerText();
    assert.doesNotMatch(stats, /sweep \d+/);
    assert.equal(await page.locator(".live-status").innerText(), "history");
    await shot(page, "network-past");
  });

  it("raised no page errors", () => {
    assert.deepEqual(errors.filter((e) => !/GL Driver|WebGL/.test(e)), []);
  });
});
