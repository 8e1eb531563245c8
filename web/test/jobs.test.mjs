// End-to-end tests of the job pages against a real daemon that receives a
// REAL MPI job: test/mpi/traffic.c, compiled with mpicc and run under the
// Netloom agent with `netloom run ... mpirun -np 4`, ranks on the fabric
// hosts n1 and n2 (two per node, named by test/mpi/nodewrap.sh), plus a
// second small job on n3. Its traffic is known exactly, so the pages'
// numbers are checked against it. Screenshots go to test-results/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { freeUdpPort, jobFinished, mpiSkip, netloomBin, newPage, shot, startBrowser, startDaemon, startJob, webDir } from "./harness.mjs";

const ITERS = 40; // rounds of traffic.c, ~110 ms each
const A = `web-e2e-a-${process.pid}`;
const B = `web-e2e-b-${process.pid}`;
const mpiDir = join(webDir, "test", "mpi");

const bin = netloomBin;
const skip = mpiSkip();

let daemon;
let browser;
let page;
let dir;
let agentPort;
const errors = [];
const runs = [];

/** Starts `netloom run` of traffic.c; resolves when the launcher exits. */
function runJob(id, np, nodeBase, iters) {
  const args = [bin, "run", "--daemon", `127.0.0.1:${agentPort}`, "--interval", "1s", "--job-id", id, "--", "mpirun", "--oversubscribe", "-np", String(np), join(mpiDir, "nodewrap.sh"), join(dir, "traffic"), String(iters)];
  const run = startJob(id, args, { NL_NODE_BASE: String(nodeBase), NL_PPN: "2" });
  runs.push(run);
  return run.done;
}

const jobDone = (id) => jobFinished(daemon, id, 100);

// The pages format bytes in powers of 1000 with 3 significant digits.
const kb = (n) => {
  const v = n / 1000;
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} KB`;
};

describe("MPI jobs", { skip }, () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-mpi-"));
    execFileSync("mpicc", ["-O1", "-o", join(dir, "traffic"), join(mpiDir, "traffic.c")]);
    agentPort = await freeUdpPort();
    // A real simulated InfiniBand fabric (ibsim + OpenSM) read by the ib source.
    daemon = await startDaemon({ fabric: "ibsim:16,8", sweeps: 2, args: ["--agent-listen", `127.0.0.1:${agentPort}`, "--agent-address-file", "-", "--job-timeout", "10s"] });
    browser = await startBrowser();
    page = await newPage(browser, errors);
  });

  after(async () => {
    for (const r of runs) if (r.p.exitCode === null) r.p.kill();
    await browser?.close();
    await daemon?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("jobs page shows a job live while it runs", async () => {
    await page.goto(`${daemon.base}/jobs`);
    await page.locator(".empty-row", { hasText: "No job is running" }).waitFor();
    assert.equal(await page.locator('.seg[data-state="running"]').getAttribute("aria-pressed"), "true");
    runJob(A, 4, 1, ITERS);
    runJob(B, 2, 3, 10);
    // No reload: the list refreshes itself.
    const row = page.locator(`tr[data-key="${A}"]`);
    await row.waitFor({ timeout: 30_000 });
    assert.match(await row.innerText(), /running/);
    assert.equal(await row.locator("td").nth(3).innerText(), "4");
    await shot(page, "jobs-live");
  });

  it("lists finished jobs and sorts them on the server", async () => {
    await Promise.all(runs.map((r) => r.done));
    const [a, b] = [await jobDone(A), await jobDone(B)];
    assert.equal(a.job.total.bytes > b.job.total.bytes, true);
    const requests = [];
    page.on("request", (r) => r.url().includes("/api/v1/jobs?") && requests.push(new URL(r.url()).searchParams));
    await page.click('.seg[data-state="finished"]');
    await page.waitForFunction(() => new URLSearchParams(location.search).get("state") === "finished");
    await page.locator(`tr[data-key="${A}"]`).waitFor();
    await page.locator(`tr[data-key="${B}"]`).waitFor();
    const keys = () => page.locator("tbody tr[data-key]").evaluateAll((rows) => rows.map((r) => r.dataset.key));
    // Sent, descending then ascending: the server orders, the URL keeps it.
    await page.click('button.sort[data-key="bytes"]');
    await page.waitForFunction(() => document.querySelector(".server-table")?.dataset.sort === "bytes" && document.querySelector(".server-table")?.getAttribute("aria-busy") === "false");
    assert.deepEqual(await keys(), [A, B]);
    const last = requests.at(-1);
    assert.equal(last.get("sort"), "bytes");
    assert.equal(last.get("order"), "desc");
    assert.equal(last.get("state"), "finished");
    assert.equal(last.get("limit"), "25");
    assert.equal(last.get("offset"), "0");
    await page.click('button.sort[data-key="bytes"]');
    await page.waitForFunction(() => document.querySelector(".server-table")?.dataset.dir === "asc" && document.querySelector(".server-table")?.getAttribute("aria-busy") === "false");
    assert.deepEqual(await keys(), [B, A]);
    assert.equal(requests.at(-1).get("order"), "asc");
    const url = new URL(page.url());
    assert.equal(url.searchParams.get("sort"), "bytes");
    assert.equal(url.searchParams.get("dir"), "asc");
    // Every metric sorts: ranks descending puts the 4-rank job first.
    await page.click('button.sort[data-key="ranks"]');
    await page.waitForFunction(() => document.querySelector(".server-table")?.dataset.sort === "ranks" && document.querySelector(".server-table")?.getAttribute("aria-busy") === "false");
    assert.deepEqual(await keys(), [A, B]);
    const rowA = await page.locator(`tr[data-key="${A}"]`).innerText();
    assert.match(rowA, new RegExp(kb(a.job.total.bytes).replace(".", "\\.")));
    // The view survives a reload.
    await page.reload();
    await page.locator(`tr[data-key="${A}"]`).waitFor();
    assert.equal(await page.locator('th:has(button[data-key="ranks"])').getAttribute("aria-sort"), "descending");
    await shot(page, "jobs");
  });

  it("job page shows its numbers, matrices, histogram, profile and regions", async () => {
    await page.locator(`tr[data-key="${A}"] a`).first().click();
    await page.waitForFunction((id) => location.pathname === `/jobs/${id}`, A);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const p2p = 10_000 * ITERS; // rank r sends (r+1)*1000 bytes per round
    const card = await page.locator(".job-summary").innerText();
    assert.match(card, /Ranks\s+4\b/);
    assert.match(card, /Nodes\s+2\b/);
    assert.match(card, new RegExp(`Point-to-point\\s+${kb(p2p)}`));
    assert.match(card, new RegExp(`Collective\\s+${kb(64 * 3 * ITERS).replace(".", "\\.")}`));
    assert.match(card, new RegExp(`One-sided\\s+${kb(256 * 4 * ITERS).replace(".", "\\.")}`));

    // Nodes: n1 holds ranks 0-1, n2 ranks 2-3; P2P sent per node.
    const nodes = page.locator('table[aria-label="Nodes of the job"] tbody tr');
    assert.equal(await nodes.count(), 2);
    const n = await nodes.evaluateAll((rows) => rows.map((r) => Array.from(r.cells, (c) => c.innerText)));
    assert.equal(n[0][0], "n1");
    assert.equal(n[0][1], "0–1 (2)");
    assert.equal(n[0][8], kb(3000 * ITERS));
    assert.equal(n[1][0], "n2");
    assert.equal(n[1][8], kb(7000 * ITERS));

    // Processes: rank r sent (r+1)*1000 bytes per round, point-to-point.
    const procs = await page.locator('table[aria-label="Processes of the job"] tbody tr').evaluateAll((rows) => rows.map((r) => Array.from(r.cells, (c) => c.innerText)));
    assert.deepEqual(procs.map((r) => r[0]), ["0", "1", "2", "3"]);
    assert.deepEqual(procs.map((r) => r[1]), ["n1", "n1", "n2", "n2"]);
    assert.deepEqual(procs.map((r) => r[9]), [1, 2, 3, 4].map((k) => kb(k * 1000 * ITERS)));

    // Time series of nodes and ranks.
    await page.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4, null, { timeout: 10_000 });

    // Rank matrix: 4x4; cell (3,0) is rank 3's 4000 bytes a round to rank 0.
    const rankHeat = page.locator("figure.heatmap").nth(0);
    const nodeHeat = page.locator("figure.heatmap").nth(1);
    assert.equal(await rankHeat.getAttribute("data-n"), "4");
    assert.equal(await rankHeat.getAttribute("data-max"), String(4000 * ITERS));
    assert.equal(await nodeHeat.getAttribute("data-n"), "2");
    const canvas = rankHeat.locator("canvas");
    await canvas.focus();
    await page.keyboard.press("ArrowDown");
    for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowDown");
    assert.equal(await rankHeat.locator(".heatmap-readout").innerText(), `rank 3 → rank 0: ${kb(4000 * ITERS)} (${(4000 * ITERS).toLocaleString("en-US")} bytes)`);
    // Hover names the cell under the mouse: (0,1).
    const box = await canvas.boundingBox();
    await page.mouse.move(box.x + (box.width * 1.5) / 4, box.y + (box.height * 0.5) / 4);
    assert.match(await rankHeat.locator(".heatmap-tip").innerText(), new RegExp(`^rank 0 → rank 1: ${kb(1000 * ITERS).replace(".", "\\.")}`));
    // The canvas holds one pixel per cell, scaled; the empty diagonal is the "none" colour.
    const px = await canvas.evaluate((c) => ({ w: c.width, h: c.height, diag: Array.from(c.getContext("2d").getImageData(0, 0, 1, 1).data), hot: Array.from(c.getContext("2d").getImageData(0, 3, 1, 1).data) }));
    assert.deepEqual([px.w, px.h], [4, 4]);
    assert.deepEqual(px.diag, [248, 250, 252, 255]);
    assert.notDeepEqual(px.hot, px.diag);
    assert.match(await rankHeat.locator(".heatmap-legend").innerText(), new RegExp(`${kb(1000 * ITERS).replace(".", "\\.")}[\\s\\S]*${kb(4000 * ITERS)}[\\s\\S]*log scale`));
    // Node matrix of all classes.
    await page.click('.panel-tools [aria-label="Traffic class"] .seg[data-value="all"]');
    await page.waitForFunction(() => new URLSearchParams(location.search).get("mclass") === "all");
    await nodeHeat.locator("canvas").focus();
    await page.keyboard.press("ArrowDown"); // the first key picks the top-left cell
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("ArrowRight");
    await page.waitForFunction(() => document.querySelectorAll("figure.heatmap")[1].querySelector(".heatmap-readout").textContent.startsWith("node n2 → node n2"));
    // Collectives: rank 0 broadcasts 64 bytes to each other rank every round.
    await page.click('.panel-tools [aria-label="Traffic class"] .seg[data-value="coll"]');
    await page.waitForFunction((v) => document.querySelector("figure.heatmap").dataset.max === v, String(64 * ITERS));

    // Message sizes: 1000 B in bin 10 (512..1023), 2000 in 11, 3000 and 4000 in 12.
    const bins = await page.locator(".histo-col").evaluateAll((cols) => Object.fromEntries(cols.map((c) => [c.dataset.bin, Number(c.dataset.count)])));
    assert.equal(bins["10"], ITERS);
    assert.equal(bins["11"], ITERS);
    assert.equal(bins["12"], 2 * ITERS);
    await page.selectOption('select[aria-label="Message sizes of"]', "3");
    await page.waitForFunction(() => new URLSearchParams(location.search).get("hrank") === "3");
    await page.waitForFunction((n) => document.querySelector('.histo-col[data-bin="12"]')?.dataset.count === String(n) && !document.querySelector('.histo-col[data-bin="10"][data-count]:not([data-count="0"])'), ITERS);

    // Time per MPI function: a bar per rank; the functions' totals.
    const prof = page.locator(".profile");
    assert.equal(await prof.getAttribute("data-ranks"), "4");
    const segs = (await prof.getAttribute("data-segments")).split(",");
    for (const f of ["MPI_Sendrecv", "MPI_Win_fence", "MPI_Bcast", "MPI_Put"]) assert.ok(segs.includes(f), `${f} in ${segs}`);
    assert.ok(!segs.includes("MPI_Init"), "setup is left out by default");
    await prof.locator("canvas").focus();
    await page.keyboard.press("ArrowRight");
    await page.keyboard.press("ArrowRight");
    assert.match(await prof.locator(".heatmap-readout").innerText(), /^rank 1: .*MPI_Sendrecv \d/);
    await page.check("#profile-setup");
    await page.waitForFunction(() => document.querySelector(".profile")?.dataset.segments.includes("MPI_Init"));
    const fn = await page.locator('table[aria-label="MPI functions"] tbody tr').evaluateAll((rows) => Object.fromEntries(rows.map((r) => [r.cells[0].innerText, r.cells[1].innerText])));
    assert.equal(fn.MPI_Sendrecv, String(4 * ITERS));
    assert.equal(fn.MPI_Put, String(4 * ITERS));
    assert.equal(fn.MPI_Bcast, String(4 * ITERS));

    // Regions from MPI_Pcontrol: pcontrol-1 holds the point-to-point traffic.
    const regions = await page.locator('table[aria-label="Regions"] tbody tr').evaluateAll((rows) => Object.fromEntries(rows.map((r) => [r.cells[0].innerText, Array.from(r.cells, (c) => c.innerText)])));
    assert.equal(regions["pcontrol-1"][1], String(4 * ITERS));
    assert.equal(regions["pcontrol-1"][4], kb(p2p));
    assert.equal(regions["pcontrol-2"][6], kb(256 * 4 * ITERS));

    // Links the job crossed: n1 and n2 hang off one leaf, so their host links.
    await page.locator('table[aria-label="Links crossed by the job"] tbody tr a').first().waitFor();
    const dirs = await page.locator('table[aria-label="Links crossed by the job"] tbody tr td:first-child').allInnerTexts();
    assert.ok(dirs.some((d) => /^n1 HCA-1:1 → /.test(d)) && dirs.some((d) => / → n2 HCA-1:1$/.test(d)), dirs.join("; "));
    await page.uncheck("#profile-setup");
    await page.click('.panel-tools [aria-label="Traffic class"] .seg[data-value="p2p"]');
    await page.waitForFunction((v) => document.querySelector("figure.heatmap").dataset.max === v, String(4000 * ITERS));
    await shot(page, "job");
  });

  it("link page splits the link's traffic by job and rank pair", async () => {
    const into = page.locator('table[aria-label="Links crossed by the job"] tbody tr a', { hasText: /→ n1 HCA-1/ }).first();
    await into.click();
    await page.waitForFunction(() => location.pathname.startsWith("/links/"));
    const jobsTable = page.locator('table[aria-label="Jobs on this link"]');
    await jobsTable.locator("tbody tr").first().waitFor();
    assert.match(await jobsTable.innerText(), new RegExp(A));
    assert.equal(new URL(page.url()).searchParams.get("job"), A);
    await page.locator('table[aria-label^="Pairs"] tbody tr').first().waitFor();
    // Into n1: rank 3 (n2) sends 4000 B a round to rank 0.
    assert.match(await page.locator(".link-pairs").innerText(), new RegExp(`rank 3 \\(n2\\)\\s+rank 0 \\(n1\\)\\s+${kb(4000 * ITERS)}`));
    await shot(page, "link-jobs");
  });

  it("map highlights the job's nodes", async () => {
    await page.goto(`${daemon.base}/jobs/${A}`);
    await page.waitForSelector(".page[data-ready]");
    await page.click("text=Show its nodes on the network map");
    await page.waitForFunction(() => location.pathname === "/network" && new URLSearchParams(location.search).has("job"));
    await page.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0, null, { timeout: 20_000 });
    await page.waitForSelector("#map[data-job-hosts]");
    const m = await page.evaluate(() => {
      const map = window.__netloomMap;
      return { job: map.job, hosts: map.highlighted, colors: map.highlighted.map((i) => map.nodeColor(i)), other: map.nodeColor(map.highlighted.at(-1) + 1) };
    });
    assert.equal(m.job, A);
    const layout = await daemon.api("/fabric/layout");
    assert.deepEqual(m.hosts.map((i) => layout.name[i]), ["n1", "n2"]);
    assert.deepEqual(m.colors, ["#059669", "#059669"]);
    assert.notEqual(m.other, "#059669");
    assert.match(await page.locator(".job-bar").innerText(), /2 of its 2 nodes highlighted\s*\(n1, n2\)/);
    await shot(page, "network-job");
    await page.click(".job-bar button");
    await page.waitForFunction(() => !new URLSearchParams(location.search).has("job"));
  });

  it("raised no page errors", () => {
    assert.deepEqual(errors.filter((e) => !/GL Driver|WebGL/.test(e)), []);
  });
});
