// End-to-end test of the job page's "Where the ranks wait" panel against a
// real daemon and REAL Open MPI jobs under the agent: the integration
// suite's test/e2e/testdata/mpi/imbalance.c (rank k sleeps k x D ms before
// each of ITERS MPI_Allreduce), run with `netloom run --waits` on 4 ranks
// (ranks 0-1 on node n1, 2-3 on n2: test/mpi/nodewrap.sh), and once more
// without --waits. The panel's numbers are checked against the daemon's
// profile (GET /jobs/{job}/profile, wait_ns), rank 3 is the one the others
// wait for, and the job without waits shows only the hint. latesend.c (rank r
// of 0-1 sleeps (r+1) x D ms before each of ITERS sends to rank r+2) run
// with --waits: the rank that waits longest for its late sender is named
// with the API's numbers.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fmtBytes, freeUdpPort, jobFinished, mpiSkip, netloomBin, newPage, resultsDir, shot, startBrowser, startDaemon, startJob, webDir } from "./harness.mjs";

const D_MS = 50; // rank k sleeps k x D_MS before each allreduce
const ITERS = 5;
const W = `web-waits-${process.pid}`;
const N = `web-nowaits-${process.pid}`;
const imbalanceSrc = resolve(webDir, "../test/e2e/testdata/mpi/imbalance.c");
const latesendSrc = resolve(webDir, "../test/e2e/testdata/mpi/latesend.c");
const nodewrap = join(webDir, "test", "mpi", "nodewrap.sh");
const skip = mpiSkip();

let daemon;
let browser;
let page;
let dir;
let agentPort;
const errors = [];
const runs = [];

/** Runs imbalance.c (or prog) on 4 ranks under `netloom run` (with --waits
 * when asked); resolves with its output when the launcher exits 0. */
function runJob(id, waits, d, iters, extra = [], prog = "imbalance", progArgs = []) {
  const args = [netloomBin, "run", "--daemon", `127.0.0.1:${agentPort}`, "--interval", "1s", "--job-id", id, ...(waits ? ["--waits"] : []), ...extra, "--", "mpirun", "--oversubscribe", "-np", "4", nodewrap, join(dir, prog), String(d), String(iters), ...progArgs];
  const run = startJob(id, args, { NL_NODE_BASE: "1", NL_PPN: "2" });
  runs.push(run);
  return run.done;
}

const jobDone = (id) => jobFinished(daemon, id);

/** The page's formatting of seconds (src/jobs/profile.ts). */
function seconds(s) {
  if (s === 0) return "0 s";
  if (s < 1e-3) return `${(s * 1e6).toFixed(0)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(s < 0.01 ? 2 : 1)} ms`;
  return `${s.toFixed(s < 10 ? 2 : 1)} s`;
}
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const cells = (locator) => locator.evaluateAll((rows) => rows.map((r) => Array.from(r.cells, (c) => c.innerText)));

describe("wait states on the job page", { skip }, () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-waits-"));
    execFileSync("mpicc", ["-O1", "-o", join(dir, "imbalance"), imbalanceSrc]);
    execFileSync("mpicc", ["-O1", "-o", join(dir, "latesend"), latesendSrc]);
    agentPort = await freeUdpPort();
    daemon = await startDaemon({ args: ["--agent-listen", `127.0.0.1:${agentPort}`, "--agent-address-file", "-", "--job-timeout", "10s", "--trace-root", dir] });
    browser = await startBrowser();
    page = await newPage(browser, errors);
  });

  after(async () => {
    for (const r of runs) if (r.p.exitCode === null) r.p.kill();
    await browser?.close();
    await daemon?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("names the rank the others wait for, with the API's numbers", async () => {
    // One after the other: two jobs oversubscribing the same cores would
    // add their own imbalance.
    await runJob(W, true, D_MS, ITERS);
    await runJob(N, false, D_MS, 2);
    await jobDone(W);
    await jobDone(N);
    const { profile: p } = await daemon.api(`/jobs/${W}/profile`);
    const { processes } = await daemon.api(`/jobs/${W}`);
    const nodeOf = Object.fromEntries(processes.map((x) => [x.rank, x.node]));
    assert.ok(p.wait_ns, "the profile of a --waits job has wait_ns");
    const k = p.functions.indexOf("MPI_Allreduce");
    assert.ok(k >= 0, `MPI_Allreduce in ${p.functions}`);
    // The program's imbalance, as the agent measured it: rank r waits about
    // (3 - r) x D per round, so the waits fall with the rank.
    const waitOf = p.ranks.map((_, i) => p.wait_ns[i].reduce((a, v) => a + v, 0) / 1e9);
    const byRank = (r) => waitOf[p.ranks.indexOf(r)];
    for (let r = 0; r < 3; r++) assert.ok(byRank(r) > byRank(r + 1), `rank ${r} waits ${byRank(r)} s, more than rank ${r + 1}'s ${byRank(r + 1)} s`);
    const allreduce0 = p.wait_ns[p.ranks.indexOf(0)][k] / 1e9;
    assert.ok(allreduce0 > 0.5 * 3 * D_MS * ITERS * 1e-3 && allreduce0 < 2 * 3 * D_MS * ITERS * 1e-3, `rank 0 waited ${allreduce0} s before MPI_Allreduce`);
    // What the page must say: the others' wait beyond rank 3's.
    const othersWaited = [0, 1, 2].reduce((a, r) => a + (byRank(r) - byRank(3)), 0);

    await page.goto(`${daemon.base}/jobs/${W}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const panel = page.locator(".waits[data-waits='1']");
    await panel.waitFor();
    const late = panel.locator(".waits-late");
    assert.equal(await late.getAttribute("data-late"), "3");
    assert.ok(Math.abs(Number(await late.getAttribute("data-others-waited")) - othersWaited) < 1e-6);
    const headline = await late.innerText();
    assert.match(headline, new RegExp(`^Rank 3 \\(n2\\) arrives last: the other 3 ranks waited ${esc(seconds(othersWaited))} for it in all\\.`));
    assert.match(headline, new RegExp(`Next latest: rank 2 \\(n2\\), others waited ${esc(seconds(byRank(0) - byRank(2) + byRank(1) - byRank(2)))} longer than it`));

    // Per rank, least wait first: each rank's wait as the API has it.
    const rows = await cells(panel.locator('table[aria-label="Wait per rank"] tbody tr'));
    assert.deepEqual(rows.map((r) => r[0]), ["3", "2", "1", "0"]);
    assert.deepEqual(rows.map((r) => r[1]), ["n2", "n2", "n1", "n1"]);
    assert.deepEqual(rows.map((r) => r[1]), [3, 2, 1, 0].map((r) => nodeOf[r]));
    assert.deepEqual(rows.map((r) => r[2]), [3, 2, 1, 0].map((r) => seconds(byRank(r))));
    assert.equal(rows[0][6], seconds(othersWaited));
    assert.equal(await panel.locator('table[aria-label="Wait per rank"] tbody tr.chosen').count(), 1);

    // Per collective: MPInside's b_allreduce beside MPI_Allreduce, summed over ranks.
    const fns = Object.fromEntries((await cells(panel.locator('table[aria-label="Wait per collective"] tbody tr'))).map((r) => [r[0], r]));
    const tot = p.totals.find((t) => t.name === "MPI_Allreduce");
    assert.deepEqual(fns.MPI_Allreduce.slice(1, 5), ["b_allreduce", String(4 * ITERS), seconds(tot.wait_ns / 1e9), seconds(tot.time_ns / 1e9)]);
    assert.equal(fns.MPI_Allreduce[6], `rank 0 · ${seconds(allreduce0)}`);

    // The stacked bars: wait, the collectives, other MPI; rank 0's readout.
    const chart = panel.locator(".waits-chart");
    assert.equal(await chart.getAttribute("data-ranks"), "4");
    assert.equal(await chart.getAttribute("data-segments"), "wait before collectives,collectives' own time,other MPI");
    await chart.locator("canvas").focus();
    await page.keyboard.press("ArrowRight");
    assert.match(await chart.locator(".heatmap-readout").innerText(), new RegExp(`^rank 0: wait before collectives ${esc(seconds(byRank(0)))} · collectives' own time `));
    for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowRight");
    assert.match(await chart.locator(".heatmap-readout").innerText(), new RegExp(`^rank 3: wait before collectives ${esc(seconds(byRank(3)))}`));

    // The time-per-function chart and table carry the wait too.
    assert.ok((await page.locator(".profile:not(.waits-chart)").getAttribute("data-segments")).startsWith("wait before collectives,"));
    const mpiFns = Object.fromEntries((await cells(page.locator('table[aria-label="MPI functions"] tbody tr'))).map((r) => [r[0], r]));
    assert.equal(mpiFns.MPI_Allreduce[3], seconds(tot.wait_ns / 1e9));
    await shot(page, "job-waits");
    // The panel alone, to look at.
    await page.locator("section.panel", { has: panel }).screenshot({ path: join(resultsDir, "job-waits-panel.png") });
  });

  it("without --waits shows how to get wait data, and nothing else", async () => {
    const { profile: p } = await daemon.api(`/jobs/${N}/profile`);
    assert.equal(p.wait_ns, undefined);
    await page.goto(`${daemon.base}/jobs/${N}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const box = page.locator(".waits-box");
    const hint = box.locator(".waits-hint[data-waits='0']");
    await hint.waitFor();
    assert.match(await hint.innerText(), /netloom run --waits/);
    assert.equal(await box.locator("table, canvas, .waits-late").count(), 0);
    assert.ok(!(await page.locator(".profile").getAttribute("data-segments")).includes("wait before collectives"));
    assert.equal(await page.locator('table[aria-label="MPI functions"] th button[data-key="wait"]').count(), 0);
    assert.equal(await page.locator("figure.chart", { hasText: "Waiting per rank" }).isVisible(), false);
    await page.locator("section.panel", { has: box }).screenshot({ path: join(resultsDir, "job-nowaits-panel.png") });
  });

  it("says what a perfect network would change for a traced job (What would help)", async () => {
    const T = `web-traced-${process.pid}`;
    await runJob(T, false, D_MS, ITERS, ["--trace", "--output", join(dir, "traced")]);
    await jobDone(T);
    const m = await daemon.api(`/jobs/${T}/model`);
    const perfect = m.what_ifs.find((p) => p.scenario === "perfect network");
    // The imbalance stays on a perfect network: rank 0 waits 3 x D per round.
    assert.ok(perfect.rank_mpi_seconds[0] > 0.9 * 3 * D_MS * ITERS * 1e-3, `perfect network: rank 0 in MPI ${perfect.rank_mpi_seconds[0]} s`);
    assert.ok(perfect.elapsed_seconds <= m.measured.elapsed_seconds, `perfect ${perfect.elapsed_seconds} s > measured ${m.measured.elapsed_seconds} s`);
    await page.goto(`${daemon.base}/jobs/${T}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const box = page.locator(".model-box");
    const rows = Object.fromEntries((await cells(box.locator('table[aria-label="Predicted time"] tbody tr'))).map((r) => [r[0], r]));
    const secs = (x) => `${x.toFixed(x < 1 ? 4 : 2)} s`;
    assert.equal(rows["perfect network"][1], secs(perfect.elapsed_seconds));
    assert.equal(rows.measured[1], secs(m.measured.elapsed_seconds));
    assert.equal(rows["as ran"][1], secs(m.as_ran.elapsed_seconds));
    // Gains are against the replay as it ran (issue 28), the replay's
    // distance from the measured run given as the calibration.
    const pct = (n) => (n >= 10 ? `${n.toFixed(0)}%` : `${n.toFixed(1)}%`);
    const vs = (v) => `${v <= 0 ? "−" : "+"}${pct(Math.abs(v))}`;
    assert.ok(Math.abs(perfect.vs_as_ran_pct - (100 * (perfect.elapsed_seconds - m.as_ran.elapsed_seconds)) / m.as_ran.elapsed_seconds) < 1e-9, `vs_as_ran_pct ${perfect.vs_as_ran_pct}`);
    assert.equal(rows["perfect network"][2], vs(perfect.vs_as_ran_pct));
    assert.equal(rows["as ran"][2], "–");
    const headline = await box.locator(".model-headline").innerText();
    assert.ok(headline.includes(`a perfect network would take ${secs(perfect.elapsed_seconds)} (${vs(perfect.vs_as_ran_pct)} against the replay as it ran)`), headline);
    assert.ok(headline.includes(`the replay as it ran takes ${secs(m.as_ran.elapsed_seconds)}, ${pct((100 * m.as_ran.elapsed_seconds) / m.measured.elapsed_seconds)} of the measured ${secs(m.measured.elapsed_seconds)}`), headline);
    // Measured and replayed MPI time per function under the same names.
    const fns = Object.fromEntries((await cells(box.locator('table[aria-label^="Predicted MPI time per function"] tbody tr'))).map((r) => [r[0], r]));
    const groups = new Set([...Object.keys(m.measured.function_groups), ...Object.keys(m.as_ran.function_groups)]);
    assert.deepEqual(new Set(Object.keys(fns)), groups);
    for (const g of groups) {
      assert.equal(fns[g][1], secs(m.measured.function_groups[g] ?? 0), `${g} measured`);
      assert.equal(fns[g][2], secs(m.as_ran.function_groups[g] ?? 0), `${g} as ran`);
    }
    assert.ok(!fns["MPI_Wait"] && !fns["MPI_Isend"] && !fns["MPI_Irecv"], `replay-only names: ${Object.keys(fns)}`);
    await page.locator("section.panel", { has: box }).screenshot({ path: join(resultsDir, "job-model-panel.png") });
    // The placement advice's predicted time: the API's replay of it,
    // against the replay as it ran, where the advice is not "nothing to gain".
    const advice = await daemon.api(`/jobs/${T}/placement`);
    const placed = page.locator(".placement-predicted");
    // The advice's sentence says each figure's change as the API's gain
    // has it: cut when the advice costs less, raised when more.
    const g = advice.gain?.as_ran;
    if (!advice.nothing_to_gain && g) {
      const change = (what, v) => (v > 0 ? `cut ${what} by ${pct(v)}` : v < 0 ? `raise ${what} by ${pct(-v)}` : `leave ${what} as it is`);
      const note = await page.locator(".placement > p.panel-note").first().innerText();
      assert.ok(note.includes(`would ${change("the job's bytes × hops", g.byte_hops_pct)}, ${change("its inter-node bytes", g.inter_node_bytes_pct)} and ${change("its heaviest link's load", g.heaviest_link_pct)}`), note);
    }
    // The model's table shows each scenario's intra-node bytes beside the inter-node ones.
    const rowsByName = Object.fromEntries((await cells(box.locator('table[aria-label="Predicted time"] tbody tr'))).map((r) => [r[0], r]));
    assert.equal(rowsByName["as ran"]?.[5], fmtBytes(m.as_ran.intra_node_p2p_bytes), `as ran: ${rowsByName["as ran"]}`);
    if (!advice.nothing_to_gain) {
      const pm = await daemon.api(`/jobs/${T}/model?placement=advice`);
      const pp = pm.what_ifs.find((p) => p.scenario === "placement");
      await placed.locator(".placement-time").waitFor({ timeout: 60_000 });
      const text = await placed.locator(".placement-time").innerText();
      assert.ok(text.includes(`placed as advised ${secs(pp.elapsed_seconds)}, ${vs(pp.vs_as_ran_pct)} against the replay as it ran`), text);
    } else {
      assert.equal(await placed.locator(".placement-time").count(), 0);
    }
    // A job that was not traced says how to get predictions.
    await page.goto(`${daemon.base}/jobs/${N}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    await page.locator(".model-box .state.empty").waitFor();
    assert.match(await page.locator(".model-box").innerText(), /netloom run --trace --output DIR/);
  });

  it("names the rank that waits longest for a late sender, with the API's numbers", async () => {
    const L = `web-latesend-${process.pid}`;
    const LITERS = 12; // 1.2 s of sends from rank 1: more than one 1 s interval
    await runJob(L, true, D_MS, LITERS, [], "latesend", ["1024"]);
    await jobDone(L);
    const { profile: p } = await daemon.api(`/jobs/${L}/profile`);
    const k = p.functions.indexOf("MPI_Recv");
    assert.ok(p.wait_ns && k >= 0, `MPI_Recv's wait in ${p.functions}`);
    const late = (r) => p.wait_ns[p.ranks.indexOf(r)][k] / 1e9;
    // Rank 3's sender (rank 1) is the latest: 2 x D per round.
    assert.ok(late(3) > 0.9 * 2 * D_MS * LITERS * 1e-3 && late(3) > late(2) && late(2) > late(0), `late-sender waits ${[0, 1, 2, 3].map(late)}`);
    const all = [0, 1, 2, 3].reduce((a, r) => a + late(r), 0);

    await page.goto(`${daemon.base}/jobs/${L}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    const panel = page.locator(".waits[data-waits='1']");
    await panel.waitFor();
    const head = panel.locator(".waits-late-sender");
    assert.equal(await head.getAttribute("data-rank"), "3");
    assert.match(await head.innerText(), new RegExp(`^Rank 3 \\(n2\\) waited longest for late senders: ${esc(seconds(late(3)))} in MPI_Recv until the message was sent; all ranks ${esc(seconds(all))}\\.`));
    const table = panel.locator('table[aria-label="Wait per rank"]');
    const heads = await table.locator("thead th").allInnerTexts();
    const col = heads.findIndex((x) => x.startsWith("Late senders"));
    assert.ok(col > 0, `columns ${heads}`);
    const rows = Object.fromEntries((await cells(table.locator("tbody tr"))).map((r) => [r[0], r]));
    for (const r of [0, 1, 2, 3]) assert.equal(rows[String(r)][col], seconds(late(r)));
    assert.equal(await panel.locator(".waits-chart").getAttribute("data-segments"), "wait before collectives,waiting for late senders,collectives' own time,other MPI");
    assert.ok((await page.locator(".profile:not(.waits-chart)").getAttribute("data-segments")).startsWith("wait before collectives,waiting for late senders,"));
    await page.locator("section.panel", { has: panel }).screenshot({ path: join(resultsDir, "job-latesend-panel.png") });

    // The waits per interval: rank 3's intervals hold waits, never more than
    // their MPI time; the chart of them is shown.
    const { series: s3 } = await daemon.api(`/jobs/${L}/processes/3/series`);
    const w3 = s3.values.wait_seconds;
    assert.ok(w3.some((v) => v > 0.1), `rank 3's waits per interval ${w3}`);
    w3.forEach((v, i) => assert.ok(v <= s3.values.mpi_seconds[i] + 1e-6, `interval ${i}: waited ${v} s of ${s3.values.mpi_seconds[i]} s in MPI`));
    const all3 = p.wait_ns[p.ranks.indexOf(3)].reduce((a, v) => a + v, 0) / 1e9; // every wait of rank 3
    assert.ok(w3.reduce((a, v) => a + v, 0) <= all3 + 1e-3, `intervals sum to more than rank 3's ${all3} s`);
    const waitChart = page.locator("figure.chart", { hasText: "Waiting per rank" });
    await waitChart.waitFor();
    assert.ok(await waitChart.isVisible());
  });

  it("raised no page errors", () => {
    assert.deepEqual(errors, []);
  });
});
