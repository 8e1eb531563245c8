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
// estimated bytes; the group table the measured bytes of each uplink. Runs
// as root; skipped otherwise or without the lab's tools, pmacctd or Open MPI.
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { createSocket } from "node:dgram";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { agentLibDir, fmtBytes, have, jobFinished, mpiSkip, newPage, shot, startBrowser, startDaemon, webDir } from "./harness.mjs";

const repo = resolve(webDir, "..");
const ethlab = join(repo, "scripts", "ethlab");

function skipReason() {
  if (process.getuid?.() !== 0) return "needs root: the Ethernet lab is made of network namespaces (docs/ethlab.md)";
  const missing = ["ip", "tc", "unshare", "lldpd", "lldpcli", "snmpd", "pmacctd", "go"].filter((t) => !have(t));
  if (missing.length) return `missing ${missing.join(", ")} (scripts/install-deps.sh)`;
  return mpiSkip();
}
const skip = skipReason();

/** A free UDP port of this machine. */
async function freeUDPPort() {
  const s = createSocket("udp4");
  await new Promise((ok) => s.bind(0, ok));
  const { port } = s.address();
  await new Promise((ok) => s.close(ok));
  return port;
}

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

describe("ECMP collisions on the job page, sampled by the lab's switches", { skip }, () => {
  const id = "c" + Array.from({ length: 4 }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[Math.floor(Math.random() * 36)]).join("");
  const JOBS = [`web-col-a-${id}`, `web-col-b-${id}`];
  let labUp = false;
  let dir;
  let daemon;
  let browser;
  let page;
  const errors = [];
  const down = () => {
    if (!labUp) return;
    labUp = false;
    try {
      execFileSync(ethlab, ["down", id], { cwd: repo, stdio: "ignore", timeout: 60_000 });
    } catch (err) {
      console.error(`ethlab down ${id}: ${err.message}`);
    }
  };
  process.once("exit", down);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-col-"));
    const port = await freeUDPPort();
    labUp = true;
    const out = execFileSync(ethlab, ["up", "--id", id, "--preset", "ecmp", "--sflow", `:${port}`, "--sflow-rate", "10"], { cwd: repo, encoding: "utf8", timeout: 180_000, stdio: ["ignore", "pipe", "pipe"] });
    const m = /^management (\S+) \(root namespace (\S+) on \S+\)/m.exec(out);
    assert.ok(m, `management network in ethlab up's output:\n${out}`);
    const [, mgmtCidr, mgmtIp] = m;
    for (const [a, b] of [
      ["h1", "h3"],
      ["h2", "h4"],
    ]) {
      execFileSync(ethlab, ["pin", id, a, b, "spine1"], { cwd: repo, timeout: 60_000 });
    }
    const cfg = join(dir, "eth.yaml");
    writeFileSync(cfg, execFileSync(ethlab, ["config", id], { cwd: repo, encoding: "utf8", timeout: 60_000 }));
    const addrFile = join(dir, "agent-address");
    daemon = await startDaemon({
      fabric: `eth:${cfg}`,
      sweep: "1s",
      sweeps: 2,
      args: ["--agent-listen", `${mgmtIp}:0`, "--agent-address-file", addrFile, "--agent-networks", mgmtCidr, "--sflow-listen", `${mgmtIp}:${port}`],
    });
    const agent = readFileSync(addrFile, "utf8").trim();
    const ring = join(dir, "ring");
    execFileSync("mpicc", ["-O2", "-o", ring, join(repo, "test", "ethlab", "testdata", "ring.c")]);
    const run = (job, hosts) => {
      const env = [`LD_PRELOAD=${join(agentLibDir, "libnetloom-ompi.so")}`, `NETLOOM_DAEMON=${agent}`, "NETLOOM_INTERVAL=1", `NETLOOM_JOB_ID=${job}`];
      return new Promise((ok, fail) =>
        execFile(ethlab, ["mpirun", id, "--hosts", hosts, ...env.flatMap((e) => ["--env", e]), ring, String(4 << 20), "60"], { cwd: repo, encoding: "utf8", timeout: 180_000 }, (err, stdout, stderr) =>
          err ? fail(new Error(`ethlab mpirun ${job}: ${err.message}\n${stdout}${stderr}`)) : ok(stdout),
        ),
      );
    };
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
    down();
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
      const texts = await panel.locator(".collision-text").allInnerTexts();
      assert.deepEqual(texts, now.map(expectedSentence));
      for (const [k, c] of now.entries()) {
        const box = panel.locator(".collision").nth(k);
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
        // The group: every uplink with what its counters measured.
        const groupRows = await tables.nth(1).locator("tbody tr").allInnerTexts();
        assert.equal(groupRows.length, c.group.length);
        for (const g of c.group) {
          const name = `${c.switch_description} → ${g.to_description}${g.port === c.port ? " (shared)" : ""}`;
          assert.ok(groupRows.some((r) => r.includes(name) && r.includes(fmtBytes(g.measured_bytes))), `a row ${name} with ${fmtBytes(g.measured_bytes)} in ${JSON.stringify(groupRows)}`);
        }
      }
      assert.deepEqual(errors, []);
    });
  }
});
