// The job page's ECMP collisions (jobs/panels/collisions.ts, docs/sflow.md)
// on a real fabric: the lab's ecmp preset (L3, spine1 and spine2) with every
// switch port exporting sFlow through pmacctd (ethlab up --sflow, 1 in 10),
// read by `netloom serve --fabric eth:FILE --sflow-listen`, two Open MPI
// rings under the agent (h1–h3 and h2–h4) at once, both host pairs pinned
// onto spine1 (ethlab pin). Each job's page shows the collisions its
// /why names, and only them: each sentence says the shared uplink, its
// large flows, the least loaded uplink with its bytes and the imbalance,
// which the test recomputes from the group's measured bytes (largest ÷
// mean); the flows table lists both jobs with their ranks and the API's
// estimated bytes; the group table the measured bytes of each uplink. The
// hot-spots page (pages/hotspots.ts) over the jobs' time shows the same
// collisions as /api/v1/hotspots over that range (both jobs linked to their
// pages, the shared uplink's and the idle one's bytes, the imbalance), its
// ranking as the API's (ports, utilization, bytes, jobs, route model,
// "Showing N of M"), and over a time before the jobs, none, as the API
// says. Runs as root; skipped otherwise or without the lab's tools, pmacctd
// or Open MPI.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { agentLibDir, ethLabUp, ethlabSkip, fmtBytes, freeUdpPort, jobFinished, labId, newPage, pageTime, routeModelText, shot, startBrowser, startDaemon } from "./harness.mjs";

const skip = ethlabSkip(["pmacctd"]);

/** The sentence a collision should read, from the API's own figures: the
 * imbalance recomputed from the group's loads. */
function expectedSentence(c) {
  const counters = c.imbalance_basis === "counters";
  const load = (g) => (counters ? g.measured_bytes : g.estimated_bytes);
  const loads = c.group.map(load);
  const mean = loads.reduce((a, b) => a + b, 0) / loads.length;
  const imbalance = Math.max(...loads) / mean;
  assert.ok(Math.abs(imbalance - c.imbalance) < 1e-9, `the API's imbalance ${c.imbalance} is the group's largest over its mean, ${imbalance}`);
  const least = c.group.reduce((a, b) => (load(b) < load(a) ? b : a));
  assert.equal(least.port, c.least_loaded.port, "least_loaded is the group's least loaded port");
  const shared = c.group.find((g) => g.port === c.port);
  const by = counters ? "by the switch counters" : "by the sFlow samples";
  return `${c.switch_description} → ${c.to_description} carried ${c.flows.length} large flows (${fmtBytes(load(shared))}) while ${c.switch_description} → ${least.to_description} carried ${fmtBytes(load(least))}: imbalance ${imbalance.toFixed(2)} (largest uplink ÷ mean of the ${c.group.length} equal-cost uplinks, ${by})`;
}

/** Checks the .collision boxes under scope against the API's collisions
 * cs: each sentence (expectedSentence), the flows table (job linked to its
 * page, ranks, hosts, estimated bytes) and the group table (measured bytes
 * of every uplink). */
async function checkCollisions(scope, cs) {
  const texts = await scope.locator(".collision-text").allInnerTexts();
  assert.deepEqual(texts, cs.map(expectedSentence));
  for (const [k, c] of cs.entries()) {
    const box = scope.locator(".collision").nth(k);
    const tables = box.locator("table");
    // Flows: job and ranks, hosts, the API's estimated bytes.
    const flowRows = await tables.nth(0).locator("tbody tr").allInnerTexts();
    assert.equal(flowRows.length, c.flows.length);
    for (const f of c.flows) {
      const who = `job ${f.job}${f.src_rank !== undefined && f.dst_rank !== undefined ? `, rank ${f.src_rank} → ${f.dst_rank}` : ""}`;
      assert.ok(
        flowRows.some((r) => r.includes(who) && r.includes(`${f.src_node} → ${f.dst_node}`) && r.includes(fmtBytes(f.estimated_bytes))),
        `a row with ${who}, ${f.src_node} → ${f.dst_node}, ${fmtBytes(f.estimated_bytes)} in ${JSON.stringify(flowRows)}`,
      );
    }
    // Every job of the collision is linked to its page.
    const hrefs = await tables.nth(0).locator("a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    assert.deepEqual([...new Set(hrefs)].sort(), c.jobs.map((j) => `/jobs/${encodeURIComponent(j)}`).sort());
    // The group: every uplink with what its counters measured.
    const groupRows = await tables.nth(1).locator("tbody tr").allInnerTexts();
    assert.equal(groupRows.length, c.group.length);
    for (const g of c.group) {
      const name = `${c.switch_description} → ${g.to_description}${g.port === c.port ? " (shared)" : ""}`;
      assert.ok(groupRows.some((r) => r.includes(name) && r.includes(fmtBytes(g.measured_bytes))), `a row ${name} with ${fmtBytes(g.measured_bytes)} in ${JSON.stringify(groupRows)}`);
    }
  }
}

/** A link direction as the pages name it (web/src/ports.ts dirLabel). */
function dirName(d) {
  const name = (p) => (p.guid === d.link.a.guid && p.port === d.link.a.port ? d.link.a_name : p.guid === d.link.b.guid && p.port === d.link.b.port ? d.link.b_name : "");
  const label = (desc, p) => (name(p) ? `${desc} ${name(p)}` : `${desc}:${p.port}`);
  return `${label(d.from_description, d.from)} → ${label(d.to_description, d.to)}`;
}

describe("ECMP collisions on the job page, sampled by the lab's switches", { skip }, () => {
  const id = labId("c");
  const JOBS = [`web-col-a-${id}`, `web-col-b-${id}`];
  let lab;
  let dir;
  let daemon;
  let browser;
  let page;
  let quiet;
  const errors = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-col-"));
    const port = await freeUdpPort("0.0.0.0");
    lab = ethLabUp(id, ["--preset", "ecmp", "--sflow", `:${port}`, "--sflow-rate", "10"]); // after() removes it
    const { mgmtCidr, mgmtIp } = lab;
    for (const [a, b] of [
      ["h1", "h3"],
      ["h2", "h4"],
    ]) {
      lab.run(["pin", id, a, b, "spine1"]);
    }
    const cfg = lab.config(dir);
    const addrFile = join(dir, "agent-address");
    daemon = await startDaemon({
      fabric: `eth:${cfg}`,
      sweep: "1s",
      sweeps: 2,
      args: ["--agent-listen", `${mgmtIp}:0`, "--agent-address-file", addrFile, "--agent-networks", mgmtCidr, "--sflow-listen", `${mgmtIp}:${port}`],
    });
    const agent = readFileSync(addrFile, "utf8").trim();
    const ring = lab.ring(dir);
    const run = (job, hosts) => {
      const env = [`LD_PRELOAD=${join(agentLibDir, "libnetloom-ompi.so")}`, `NETLOOM_DAEMON=${agent}`, "NETLOOM_INTERVAL=1", `NETLOOM_JOB_ID=${job}`];
      return lab.mpirun(hosts, env, [ring, String(4 << 20), "60"], 180_000);
    };
    // A time before the jobs: the lab's switches sampling, no job's flows.
    // The collector keeps flows in 10 s buckets aligned on Unix time
    // (internal/sflow): the jobs start in a later bucket than this one.
    quiet = Math.floor(Date.now() / 1000);
    await new Promise((ok) => setTimeout(ok, ((Math.floor(quiet / 10) + 1) * 10 + 1) * 1000 - Date.now()));
    await Promise.all([run(JOBS[0], "h1,h3"), run(JOBS[1], "h2,h4")]);
    for (const j of JOBS) await jobFinished(daemon, j, 300);
    await new Promise((ok) => setTimeout(ok, 9_000)); // net-snmp's cache and two sweeps past the end
    browser = await startBrowser();
    page = await newPage(browser, errors);
    page.on("response", (r) => {
      if (r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
  });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
    lab?.down();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [i, job] of JOBS.entries()) {
    it(`job ${i === 0 ? "h1–h3" : "h2–h4"}'s page names its collisions as /why does`, async () => {
      const why = await daemon.api(`/jobs/${job}/why?limit=1`);
      const cs = why.collisions;
      assert.ok(cs.length >= 1, `job ${job}: collisions ${JSON.stringify(cs)}`);
      for (const c of cs) {
        assert.equal(c.to_description, "spine1", "the shared uplink is a leaf's to spine1");
        assert.deepEqual([...c.jobs].sort(), [...JOBS].sort(), "both jobs on it");
      }
      await page.goto(`${daemon.base}/jobs/${encodeURIComponent(job)}`);
      await page.waitForSelector(".page[data-ready]", { timeout: 30_000 });
      const panel = page.locator(".collisions-panel");
      await panel.waitFor({ state: "visible", timeout: 20_000 });
      await shot(page, `collisions-${i}`);
      // The same collisions as the API now (the job finished: its range is fixed).
      const now = (await daemon.api(`/jobs/${job}/why?limit=1`)).collisions;
      await checkCollisions(panel, now);
      // The links table says per direction how the job's bytes were split
      // over the equal-cost uplinks: as /why (the table's limit) says.
      const links = await daemon.api(`/jobs/${job}/why?limit=20`);
      const rows = page.locator('table[aria-label="Links crossed by the job"] tbody tr');
      await page.waitForFunction((n) => document.querySelectorAll('table[aria-label="Links crossed by the job"] tbody tr').length >= n, links.links.length, { timeout: 10_000 }).catch(() => {});
      const cells = await rows.evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.innerText)));
      assert.equal(cells.length, links.links.length, JSON.stringify(cells));
      for (const x of links.links) {
        const row = cells.find((c) => c[0] === dirName(x));
        assert.ok(row, `no row for ${dirName(x)}: ${cells.map((c) => c[0]).join("; ")}`);
        assert.equal(row.at(-1), routeModelText(x, links.route_model), `route model of ${dirName(x)}`);
      }
      assert.ok(
        links.links.some((x) => x.route_model?.startsWith("sflow-observed")),
        `a direction split by what sFlow saw: ${JSON.stringify(links.links.map((x) => x.route_model))}`,
      );
      assert.deepEqual(errors, []);
    });
  }

  it("the hot-spots page over the jobs' time names the collision and ranks the directions as /hotspots does", async () => {
    const spans = (await Promise.all(JOBS.map((j) => daemon.api(`/jobs/${encodeURIComponent(j)}`)))).map((r) => r.job);
    const from = Math.floor(Math.min(...spans.map((j) => Date.parse(j.start))) / 1000) - 1;
    const to = Math.ceil(Math.max(...spans.map((j) => Date.parse(j.end))) / 1000) + 2;
    const LIMIT = 3;
    await page.goto(`${daemon.base}/hotspots?from=${from}&to=${to}&min=0&limit=${LIMIT}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 30_000 });
    const nav = page.locator('nav.nav a[data-key="hotspots"]');
    assert.equal(await nav.innerText(), "Hot spots");
    assert.equal(await nav.getAttribute("aria-current"), "page");
    await shot(page, "hotspots-collision");
    const r = await daemon.api(`/hotspots?at=${to}&window=${to - from}s&min_utilization=0&limit=${LIMIT}`);
    // The ranking: cut at LIMIT and said so.
    assert.ok(r.total > LIMIT && r.truncated, `more than ${LIMIT} directions carried traffic: total ${r.total}`);
    assert.equal(await page.locator(".hotspots-summary").innerText(), `Link directions at or above 0.0% utilization from ${await pageTime(page, r.from)} to ${await pageTime(page, r.to)}, the busiest first.`);
    assert.equal(await page.locator(".hotspots-listed").innerText(), `Showing ${LIMIT} of ${r.total} link directions at or above 0.0% utilization.`);
    const rows = await page.locator("table[aria-label='Busiest link directions'] tbody tr").allInnerTexts();
    assert.equal(rows.length, r.hotspots.length);
    for (const d of r.hotspots) {
      const parts = [dirName(d), fmtBytes(d.monitored_bytes), d.route_model ?? r.route_model, ...d.jobs.map((j) => `${j.job} ${fmtBytes(j.bytes)}`)];
      assert.ok(rows.some((row) => parts.every((x) => row.includes(x))), `a row with ${JSON.stringify(parts)} in ${JSON.stringify(rows)}`);
    }
    // The collisions: both jobs, the shared uplink's and the idle one's bytes, the imbalance.
    assert.ok(r.collisions.length >= 1, `collisions ${JSON.stringify(r.collisions)}`);
    for (const c of r.collisions) {
      assert.equal(c.to_description, "spine1", "the shared uplink is a leaf's to spine1");
      assert.deepEqual([...c.jobs].sort(), [...JOBS].sort(), "both jobs on it");
      assert.equal(c.least_loaded.to_description, "spine2", "the idle alternative is the uplink to spine2");
    }
    const panel = page.locator(".collisions-panel");
    const n = r.collisions.length;
    assert.equal(
      await panel.locator(".collisions-summary").innerText(),
      `${n} ECMP collision${n === 1 ? "" : "s"} in this time: large flows sharing an uplink while an equal-cost uplink of the same switch carried less.`,
    );
    await checkCollisions(panel, r.collisions);
    assert.match(await panel.locator(".imbalance-note").innerText(), /^Imbalance: the busiest uplink of a switch's equal-cost group over the group's mean; 1\.00 is an even spread/);
    assert.deepEqual(errors, []);
  });

  it("the hot-spots page before the jobs shows no collision, as /hotspots says", async () => {
    const r = await daemon.api(`/hotspots?at=${quiet}&min_utilization=0`);
    assert.deepEqual(r.collisions, [], "no collision before the jobs ran");
    await page.goto(`${daemon.base}/hotspots?at=${quiet}&min=0`);
    await page.waitForSelector(".page[data-ready]", { timeout: 30_000 });
    await shot(page, "hotspots-quiet");
    const panel = page.locator(".collisions-panel");
    assert.equal(await panel.locator(".collisions-summary").innerText(), "No ECMP collisions in this time: no switch's sampled large flows shared an uplink while an equal-cost one carried less.");
    assert.equal(await panel.locator(".collision").count(), 0);
    const listed =
      r.hotspots.length < r.total
        ? `Showing ${r.hotspots.length} of ${r.total} link directions`
        : r.total === 0
          ? "No link directions"
          : r.total === 1
            ? "The only link direction"
            : `All ${r.total} link directions`;
    assert.equal(await page.locator(".hotspots-listed").innerText(), `${listed} at or above 0.0% utilization.`);
    assert.deepEqual(errors, []);
  });
});
