// End-to-end tests of the web UI against a real daemon on a real simulated
// InfiniBand fabric (ibsim + OpenSM, read by the ib source): every page
// renders its data, navigation and sorting work, and what ibsim's console
// does to the fabric shows on the pages end to end: transmit data pumped
// into one switch port colours that link direction on the map and rises in
// the link page's chart, symbol errors put the port on the Errors page and
// colour its switch, an unlinked cable is a link_down event and a relinked
// one comes back. Time travel shows older data. Screenshots of every page
// go to test-results/.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { hoverTime, newPage, pageTime, shot, startBrowser, startDaemon, until } from "./harness.mjs";

// The map's colours (web/src/map/colors.ts): the ends of the utilization
// ramp and the switch-with-errors mark.
const HOT = "rgb(220,38,38)"; // 100%
const IDLE = "rgb(203,213,225)"; // 0%
const ERROR_COLOR = "#dc2626";

let daemon;
let browser;
let page;
const errors = [];
let startedAt;
let links;
let nodes;
let switchLink; // where traffic is pumped in, A→B
let aSwitch;
let pumped; // { from, to } Unix seconds around the traffic pump
let hotAt; // a time (Unix seconds) whose newest sample of the link has A→B over capacity

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns something truthy; returns that. */

/** Sends ibsim console commands made by cmd(1), cmd(2), ... one after the
 * other until stopped; stop() resolves with the last k sent. */
function pump(cmd) {
  let stopped = false;
  let k = 0;
  const done = (async () => {
    while (!stopped) {
      await daemon.ibsim.console(cmd(k + 1));
      k++;
      await sleep(50);
    }
    return k;
  })();
  done.catch(() => {}); // reported by stop()
  return {
    sent: () => k,
    stop: () => {
      stopped = true;
      return done;
    },
  };
}

const decode = (b64) => Array.from(Buffer.from(b64, "base64"));
const hasBit = (bits, i) => (bits[i >> 3] & (1 << (i & 7))) !== 0;
const desc = (guid) => nodes.find((n) => n.guid === guid).description;
const isSwitch = (guid) => nodes.find((n) => n.guid === guid)?.type === "switch";

/** The map's live state, read together. */
const mapState = (j) =>
  page.evaluate((j) => {
    const m = window.__netloomMap;
    return { sweep: m.sweep, updates: m.updates, util: Array.from(m.util), colors: j >= 0 ? m.edgeColors(j) : null };
  }, j);

/** Index of a link in the layout (its position in `edges`). */
function layoutLink(layout, l) {
  const ports = typeof layout.ports === "string" ? decode(layout.ports) : layout.ports; // Go's []uint8 is base64
  const j = layout.edges.findIndex((_, k) => k % 2 === 0 && layout.guid[layout.edges[k]] === l.a.guid && ports[k] === l.a.port && layout.guid[layout.edges[k + 1]] === l.b.guid);
  assert.ok(j >= 0, `link ${l.id} in the layout`);
  return j / 2;
}

/** "125 GB/s" → 125e9 (the pages' powers of 1000). */
function parseRate(s) {
  const m = /^([\d.]+) (B|KB|MB|GB|TB|PB)\/s$/.exec(s.trim());
  assert.ok(m, `a rate: ${s}`);
  return Number(m[1]) * 1000 ** ["B", "KB", "MB", "GB", "TB", "PB"].indexOf(m[2]);
}

before(async () => {
  // 16 hosts under 8-port switches: 8 switches, 32 links. Re-discovery
  // every 2 s so an unlinked cable shows within seconds.
  daemon = await startDaemon({ fabric: "ibsim:16,8", args: ["--discover-interval", "2s"] });
  startedAt = (await daemon.api("/status")).time;
  browser = await startBrowser();
  page = await newPage(browser, errors);
  links = (await daemon.api("/fabric/links")).links;
  nodes = (await daemon.api("/fabric/nodes")).nodes;
  switchLink = links.find((l) => isSwitch(l.a.guid) && isSwitch(l.b.guid));
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
    assert.equal(m.nodes, nodes.length);
    assert.equal(m.nodes, layout.guid.length);
    assert.equal(m.links, links.length);
    assert.equal(m.links, layout.edges.length / 2);
    assert.ok(layout.compute_ms >= 0);
    assert.equal(await page.locator("canvas").count() > 0, true);
    // Every link of the map leads to that link's page: its id is the API's.
    const ids = await page.evaluate(() => Array.from({ length: window.__netloomMap.links }, (_, j) => window.__netloomMap.linkId(j)));
    assert.deepEqual(ids.slice().sort(), links.map((l) => l.id).sort());
  });

  it("colours the direction a switch port sends on, from its real counters, live", async () => {
    const layout = await daemon.api("/fabric/layout");
    const j = layoutLink(layout, switchLink);
    const cap = switchLink.capacity_bytes_per_second;
    // Only management traffic so far: every measured direction idle.
    await page.waitForFunction(() => window.__netloomMap.updates >= 1, null, { timeout: 10_000 });
    const idle = await mapState(j);
    assert.ok(idle.util.every((q) => q === 0 || q === 255), `idle fabric: ${idle.util}`);
    assert.ok(idle.util.some((q) => q === 0), "link directions are measured");
    assert.deepEqual(idle.colors, [IDLE, IDLE]);

    // Each step adds a second's worth of the link's capacity to A's
    // PortXmitData (counted in 4-byte words): A→B runs far over 100%.
    const words = Math.ceil(cap / 4);
    pumped = { from: Math.floor(Date.now() / 1000) };
    const p = pump((k) => `PerformanceSet "${daemon.ibsim.id(switchLink.a.guid)}"[${switchLink.a.port}] PortCountersExtended.PortXmitData=${k * words}`);
    let hot;
    try {
      // The map and the API agree on one sweep: A→B full, B→A idle.
      hot = await until(async () => {
        const m = await mapState(j);
        const api = await daemon.api("/fabric/utilization");
        const link = await daemon.api(`/links/${switchLink.id}`);
        const same = (await daemon.api("/fabric/utilization")).sweep === m.sweep && api.sweep === m.sweep; // all of one sweep
        return same && m.util[2 * j] === 254 ? { m, api, link } : false;
      }, "the map to show the pumped direction at 100%");
      assert.deepEqual(hot.m.util, decode(hot.api.util), "the map's colours are the stream's");
      assert.equal(hot.m.util[2 * j + 1], 0, "the other direction stays idle");
      assert.deepEqual(hot.m.colors, [HOT, IDLE]);
      // The link API at that sweep: A→B from A's counter, over capacity.
      const link = hot.link;
      assert.equal(link.directions[0].from.guid, switchLink.a.guid);
      assert.ok(link.directions[0].utilization_pct >= 100, `A→B ${link.directions[0].utilization_pct}%`);
      assert.ok(link.directions[1].utilization_pct < 0.2, `B→A ${link.directions[1].utilization_pct}%`);
      await shot(page, "network");
      // Keep pumping until the store has a stretch of it for the pages below.
      await until(async () => {
        const c = await daemon.api(`/links/${switchLink.id}/counters?from=${pumped.from}&counters=xmit_data_bytes`);
        return c.series[0].rate.xmit_data_bytes.filter((v) => v >= cap).length >= 4;
      }, "four sweeps of the pumped traffic stored");
    } finally {
      await p.stop();
      pumped.to = Math.ceil(Date.now() / 1000);
    }
    // Without the pump the direction goes back to idle.
    const calm = await until(async () => {
      const m = await mapState(j);
      return m.util[2 * j] === 0 ? m : false;
    }, "the map to show the link idle again");
    assert.ok(calm.sweep > hot.m.sweep);
    assert.deepEqual(calm.colors, [IDLE, IDLE]);
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

  it("link page's traffic chart shows the pumped traffic in its direction, as the API has it", async () => {
    assert.ok(pumped?.to, "the map test pumped traffic");
    // A fixed range around the pump, so the chart stays put under the mouse.
    const from = pumped.from - 5;
    const to = pumped.to + 2;
    // Once the store holds the range's last sweeps, the page reads what the API read.
    const c = await until(async () => {
      const c = await daemon.api(`/links/${switchLink.id}/counters?from=${from}&to=${to}&counters=xmit_data_bytes,rcv_data_bytes`);
      return Date.now() / 1000 > to + 1 && c.series.every((s) => s.time.at(-1) > to - 1) ? c : false;
    }, "the range's samples to be stored", 20_000);
    const [a, b] = c.series;
    assert.equal(a.port.guid, switchLink.a.guid);
    const ab = a.rate.xmit_data_bytes;
    const ba = b.rate.xmit_data_bytes;
    const hot = ab.map((v, i) => (v >= c.link.capacity_bytes_per_second ? i : -1)).filter((i) => i >= 0);
    assert.ok(hot.length >= 4, `A→B over capacity in ${hot.length} samples: ${ab}`);
    assert.ok(ba.every((v) => v < 0.01 * c.link.capacity_bytes_per_second), `B→A idle: ${ba}`);
    // The chart's time axis is the union of both ends' sample times: one
    // sweep reads both ends, so they are the same.
    assert.deepEqual(b.time, a.time);
    const time = a.time;
    const i = hot[Math.floor(hot.length / 2)];
    // For the map in the past (below): a whole second whose newest sample is hot.
    for (const h of [i, ...hot]) {
      const at = Math.floor(a.time[h]);
      if (hot.includes(a.time.findLastIndex((x) => x <= at))) {
        hotAt = at;
        break;
      }
    }
    assert.ok(hotAt, `a second ending in a hot sample: ${a.time}`);

    await page.goto(`${daemon.base}/links/${switchLink.id}?from=${from}&to=${to}`);
    const chart = page.locator("figure.chart").first();
    await chart.locator(".u-over").waitFor();
    assert.equal(Number(await chart.getAttribute("data-points")), time.length);
    await hoverTime(page, chart, time[i]);
    const legend = async () => Object.fromEntries(await chart.locator("tr.u-series").evaluateAll((rows) => rows.map((r) => [r.querySelector(".u-label").textContent, r.querySelector(".u-value").textContent])));
    const shown = await until(async () => {
      const l = await legend();
      return l.time && l.time !== "--" ? l : false;
    }, "the chart's legend at the hovered sample", 10_000);
    const [na, nb] = [desc(switchLink.a.guid), desc(switchLink.b.guid)];
    assert.equal(shown.time, await pageTime(page, time[i]));
    const near = (s, want) => Math.abs(parseRate(s) - want) <= 0.006 * want; // 3 significant digits
    assert.ok(near(shown[`${na} → ${nb}`], ab[i]), `A→B shows ${shown[`${na} → ${nb}`]}, API ${ab[i]}`);
    assert.ok(near(shown[`${nb} → ${na}`], ba[i]), `B→A shows ${shown[`${nb} → ${na}`]}, API ${ba[i]}`);
    await shot(page, "link-traffic");
  });

  it("node page lists ports and sorts them", async () => {
    await page.goto(`${daemon.base}/nodes/${aSwitch.guid}`);
    // The ports table only: "Jobs on this node" loads beside it (its empty row is a row too).
    const rows = page.locator('table.data[aria-label="Ports"] tbody tr');
    await rows.first().waitFor();
    assert.equal(await page.locator("h1").innerText(), aSwitch.description);
    assert.equal(await rows.count(), aSwitch.ports);
    await page.click('button.sort[data-key="out"]');
    assert.equal(await page.locator('th:has(button[data-key="out"])').getAttribute("aria-sort"), "descending");
    assert.equal(new URL(page.url()).searchParams.get("sort"), "out");
    const cells = await rows.locator("td:nth-child(4)").allInnerTexts();
    const bytes = (s) => {
      const m = /([\d.]+) (B|KB|MB|GB|TB)/.exec(s);
      return m ? Number(m[1]) * 1000 ** ["B", "KB", "MB", "GB", "TB"].indexOf(m[2]) : -1;
    };
    for (let i = 1; i < cells.length; i++) assert.ok(bytes(cells[i - 1]) >= bytes(cells[i]), `sorted: ${cells[i - 1]} >= ${cells[i]}`);
    await page.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4, null, { timeout: 10_000 });
    await shot(page, "node");
    // Navigation: a peer link leads to another node page.
    await rows.locator("td:nth-child(2) a").first().click();
    await page.waitForFunction((g) => !location.pathname.endsWith(g) && location.pathname.startsWith("/nodes/"), aSwitch.guid);
  });

  it("symbol errors on a switch port colour the switch and list the port on the errors page", async () => {
    // The leaf port of the last host: a switch port of its own.
    const host = nodes.filter((n) => n.type === "ca").sort((x, y) => y.lid - x.lid)[0];
    const hl = links.find((l) => l.a.guid === host.guid || l.b.guid === host.guid);
    const port = hl.a.guid === host.guid ? hl.b : hl.a;
    const sw = nodes.find((n) => n.guid === port.guid);
    await page.goto(`${daemon.base}/network`);
    await firstFrame();
    const layout = await daemon.api("/fabric/layout");
    const i = layout.guid.indexOf(sw.guid);
    const clean = await page.evaluate((i) => window.__netloomMap.nodeColor(i), i);
    assert.notEqual(clean, ERROR_COLOR);
    assert.equal((await daemon.api("/fabric/errors?from=-1h")).total, 0, "no errors before");

    const p = pump((k) => `PerformanceSet "${daemon.ibsim.id(sw.guid)}"[${port.port}] PortCounters.SymbolErrorCounter=${k}`);
    let total;
    try {
      const red = await until(async () => {
        const { sweep, colors } = await page.evaluate(() => {
          const m = window.__netloomMap;
          return { sweep: m.sweep, colors: Array.from({ length: m.nodes }, (_, k) => m.nodeColor(k)) };
        });
        const api = await daemon.api("/fabric/utilization");
        return api.sweep === sweep && colors[i] === ERROR_COLOR && p.sent() >= 10 ? { colors, api } : false;
      }, "the map to mark the switch with errors");
      const bits = decode(red.api.errors);
      assert.ok(hasBit(bits, i), "the stream marks the switch");
      assert.equal(red.api.error_nodes, 1);
      assert.deepEqual(
        red.colors.flatMap((c, k) => (c === ERROR_COLOR ? [k] : [])),
        [i],
        "only that switch is red",
      );
      await shot(page, "network-errors");
    } finally {
      total = await p.stop();
    }
    // Every rise was swept: the range sums to the counter's last value.
    const row = await until(async () => {
      const e = await daemon.api("/fabric/errors?from=-1h");
      const r = e.ports.find((x) => x.port.guid === sw.guid && x.port.port === port.port);
      return e.total === 1 && r?.total === total ? r : false;
    }, `the errors API to count ${total} symbol errors`);
    assert.deepEqual(row.counters, { symbol_errors: total });

    await page.click('nav.nav a[data-key="errors"]');
    await page.locator("h1", { hasText: "Errors" }).waitFor();
    await page.locator("table.data tbody tr").first().waitFor();
    assert.equal(await page.locator(".empty-row").count(), 0);
    const rows = page.locator("table.data tbody tr");
    assert.equal(await rows.count(), 1);
    const text = await rows.first().innerText();
    assert.ok(text.includes(`${row.node} port ${port.port}`), `${text} names ${row.node} port ${port.port}`);
    assert.ok(text.includes(`${row.peer_node} port 1`), `${text} names the peer ${row.peer_node} port 1`);
    assert.equal(row.peer.guid, host.guid);
    assert.match(text, new RegExp(`symbol_errors ${total}\\b`));
    assert.match(text, /over threshold/);
    await shot(page, "errors");
  });

  it("an unlinked cable is a link_down event, and relinking brings it back", async () => {
    const victim = links.filter((l) => isSwitch(l.a.guid) && isSwitch(l.b.guid) && l.id !== switchLink.id).at(-1);
    await page.click('nav.nav a[data-key="events"]');
    await page.locator("table.data tbody tr td .badge").first().waitFor();
    assert.match(await page.locator("table.data tbody").innerText(), /fabric discovered/);
    await page.selectOption("#event-kind", "link_down");
    await page.waitForFunction(() => location.search.includes("kind=link_down"));
    await page.locator(".empty-row").waitFor();

    const event = (kind) => async () => (await daemon.api(`/events?from=-10m&kind=${kind}`)).events.find((e) => e.detail.includes(victim.id));
    const id = daemon.ibsim.id(victim.a.guid);
    await daemon.ibsim.console(`Unlink "${id}"[${victim.a.port}]`);
    let relinked = false;
    try {
      await until(event("link_down"), `a link_down event for ${victim.id}`);
      assert.equal((await daemon.api("/fabric/links")).links.length, links.length - 1);
      await page.reload();
      await page.locator("table.data tbody tr td .badge").first().waitFor();
      const row = page.locator("table.data tbody tr", { hasText: `link ${victim.id} down` });
      assert.equal(await row.count(), 1);
      assert.match(await row.innerText(), /link down/);
      await shot(page, "events");

      await daemon.ibsim.console(`ReLink "${id}"[${victim.a.port}]`);
      relinked = true;
      await until(event("link_up"), `a link_up event for ${victim.id}`);
    } finally {
      if (!relinked) await daemon.ibsim.console(`ReLink "${id}"[${victim.a.port}]`).catch(() => {});
    }
    await page.selectOption("#event-kind", "link_up");
    await page.waitForFunction(() => location.search.includes("kind=link_up"));
    await page.locator("table.data tbody tr td .badge", { hasText: "link up" }).first().waitFor();
    assert.match(await page.locator("table.data tbody").innerText(), new RegExp(`link ${victim.id} up`));
    // A list cut says so with the daemon's total: the newest 2 of the
    // events of the last day, at least the 3 this test saw happen
    // (discovered, down, up), all of which the API lists uncut.
    const all = await daemon.api("/events?from=-24h&limit=100000");
    assert.ok(all.total >= 3 && all.events.length === all.total && !all.truncated, `${all.total} events`);
    await page.goto(`${daemon.base}/events?limit=2`);
    await page.locator("table.data tbody tr td .badge").first().waitFor();
    const summary = page.locator(".page-head .sub");
    const total = Number(await summary.getAttribute("data-total"));
    assert.ok(total >= all.total, `the page's total ${total}, the API's ${all.total} a moment before`);
    assert.match(await summary.innerText(), new RegExp(`^Showing the newest 2 of ${total} events from .+ to .+\\.$`));
    assert.equal(await page.locator("table.data tbody tr").count(), 2);
    // The map draws every link again.
    await page.goto(`${daemon.base}/network`);
    await firstFrame();
    assert.equal(await page.evaluate(() => window.__netloomMap.links), links.length);
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

    // The map at a past time is drawn from stored samples, not the stream:
    // during the traffic pump, the pumped direction is full.
    assert.ok(hotAt, "the link test found a time inside the traffic");
    const at = hotAt;
    const then = await daemon.api(`/fabric/utilization?at=${at}`);
    await page.goto(`${daemon.base}/network?at=${at}`);
    await firstFrame();
    await page.waitForFunction(() => window.__netloomMap.updates >= 1);
    const layout = await daemon.api(`/fabric/layout?at=${at}`);
    const j = layoutLink(layout, switchLink);
    const m = await mapState(j);
    assert.deepEqual(m.util, decode(then.util));
    assert.equal(m.util[2 * j], 254, `A→B at ${at}`);
    assert.deepEqual(m.colors, [HOT, IDLE]);
    const stats = await page.locator(".map-stats").innerText();
    assert.doesNotMatch(stats, /sweep \d+/);
    assert.equal(await page.locator(".live-status").innerText(), "history");
    await shot(page, "network-past");
  });

  it("raised no page errors", () => {
    assert.deepEqual(errors.filter((e) => !/GL Driver|WebGL/.test(e)), []);
  });
});
