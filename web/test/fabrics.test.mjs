// End-to-end test of a view of several fabrics in the browser
// (docs/postgres.md, "Several fabrics"): a REAL PostgreSQL server
// (test/postgres/cmd/pg-up), two collectors each owning a simulated fabric
// (hosts a1..a8 in "east", b1..b8 in "west") and one `--role api` daemon on
// that database. On the API daemon's pages every node says its fabric: the
// map's search results, the map's selection line and the node page, with
// the API's own answer (`fabric` in /api/v1/nodes/…) as the truth. The API
// daemon's header leaves out the Alerts link (it keeps no alerts) and no
// page request fails.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { newPage, shot, startBrowser, startDaemon, startPostgres } from "./harness.mjs";

const skip = existsSync("/usr/lib/postgresql") ? false : "PostgreSQL is not installed (scripts/install-deps.sh)";
const EAST = "sim:fat-tree:hosts=8,radix=4,prefix=a";
const WEST = "sim:fat-tree:hosts=8,radix=4,prefix=b";

let pg;
const daemons = [];
let apid;
let browser;
let page;
const errors = [];

describe("several fabrics on one database", { skip }, () => {
  before(async () => {
    pg = await startPostgres();
    const common = ["--db", pg.url, "--poll-interval", "500ms"];
    daemons.push(await startDaemon({ fabric: EAST, args: [...common, "--fabric-name", "east"] }));
    daemons.push(await startDaemon({ fabric: WEST, args: [...common, "--fabric-name", "west"] }));
    apid = await startDaemon({ fabric: null, sweeps: 0, args: [...common, "--role", "api"] });
    daemons.push(apid);
    // The API daemon reads both fabrics from the database.
    for (let i = 0; ; i++) {
      const r = await apid.api("/fabric/nodes").catch(() => ({ nodes: [] }));
      if (r.nodes.length === 2 * (8 + 6)) break;
      if (i > 150) throw new Error(`the API daemon lists ${r.nodes.length} nodes, want 28`);
      await new Promise((res) => setTimeout(res, 200));
    }
    browser = await startBrowser();
    page = await newPage(browser, errors);
  });

  after(async () => {
    await browser?.close();
    for (const d of daemons.reverse()) await d.stop();
    await pg?.stop();
  });

  it("names each node's fabric on the map and the node page", async () => {
    const { nodes } = await apid.api("/fabric/nodes");
    const b1 = nodes.find((n) => n.type === "ca" && /^b1\b/.test(n.description));
    const a3 = nodes.find((n) => n.type === "ca" && /^a3\b/.test(n.description));
    assert.ok(b1 && a3, "hosts b1 and a3 listed");
    assert.equal((await apid.api(`/nodes/${b1.guid}`)).node.fabric, "west");
    assert.equal((await apid.api(`/nodes/${a3.guid}`)).node.fabric, "east");

    await page.goto(`${apid.base}/network`);
    // An API daemon keeps no alerts (the collectors do): no Alerts link to poll.
    assert.equal((await apid.api("/status")).role, "api");
    await page.locator('.nav a[data-key="alerts"]').waitFor({ state: "hidden" });
    assert.equal(await page.locator('.nav a[data-key="network"]').isVisible(), true);
    await page.fill("input.map-search", "b1");
    const hit = page.locator(".search-results button", { hasText: "b1" }).first();
    await hit.waitFor();
    assert.match(await hit.innerText(), /host · fabric west · LID \d+/);
    await hit.click();
    await page.waitForFunction((g) => new URLSearchParams(location.search).get("node") === g, b1.guid);
    assert.match(await page.locator(".map-info").innerText(), /^b1\b.* · fabric west · GUID /);
    await shot(page, "fabrics-map");

    await page.goto(`${apid.base}/nodes/${a3.guid}`);
    const sub = page.locator(".page-head .sub");
    await page.waitForFunction(() => document.querySelector(".page-head .sub")?.textContent?.includes("GUID"));
    assert.match(await sub.innerText(), /^Host channel adapter · fabric east · GUID /);
    await shot(page, "fabrics-node");
  });

  it("raised no page errors", () => {
    assert.deepEqual(errors, []);
  });
});
