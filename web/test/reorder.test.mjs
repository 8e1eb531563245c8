// The job page's "Rank reordering" panel (docs/reorder.md) against a real
// daemon fed agent datagrams carrying netloom_reorder records
// (test/agentwire.mjs: no MPI job needed; test/e2e/reorder_test.go runs the
// real calls): every figure the panel shows equals what the ranks reported
// and what GET /jobs/{job} gives, the ranks' records of one call are joined,
// and a job that never reordered shows no panel.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sendDatagrams } from "./agentwire.mjs";
import { freeUdpPort, jobFinished, newPage, startBrowser, startDaemon } from "./harness.mjs";

const R = `web-reorder-${process.pid}`;
const N = `web-noreorder-${process.pid}`;
const WORLD = 4;
const t0 = BigInt(Date.now()) * 1_000_000n;

// Call 0: Scotch's order, world ranks 1 and 2 swap (old -> new rank);
// call 1, since the mark "phase2": nothing to gain, the order kept.
const newRank = [0, 2, 1, 3];
const call0 = (rank) => ({
  index: 0, time_unix_ns: t0 - 5_000_000_000n + BigInt(rank) * 1_000_000n, ranks: WORLD, comm_world: true, nodes: 2, method: "scotch", moved: 2,
  old_rank: rank, new_rank: newRank[rank], inter_node_before: 1_966_080, inter_node_after: 655_360, total_bytes: 2_621_440,
  seconds: 0.004 + rank / 1000, map_seconds: 0.0007,
});
const call1 = (rank) => ({
  index: 1, time_unix_ns: t0 - 2_000_000_000n, ranks: WORLD, comm_world: false, nodes: 2, method: "kept", moved: 0,
  old_rank: newRank[rank], new_rank: newRank[rank], inter_node_before: 655_360, inter_node_after: 655_360, total_bytes: 1_310_720,
  since: "phase2", seconds: 0.002, map_seconds: 0.0004,
});

function snapshot(job, rank, reorders) {
  return {
    version: 1, job_id: job, rank, world_size: WORLD, seq: 0, chunk: 0, chunks: 1, final: true,
    start_unix_ns: t0 - 10_000_000_000n, time_unix_ns: t0, interval_ns: 1_000_000_000,
    process: { node: rank < 2 ? "n1" : "n2", host: rank < 2 ? "n1" : "n2", pid: 2000 + rank, mpi_library: "Open MPI 4.1.6", program: "ring", user: "root", wall_seconds: 10, mpi_seconds: 1 },
    functions: [{ name: "MPI_Sendrecv", calls: 40, time_ns: 1e6, bytes_sent: 163_840, bytes_received: 163_840 }],
    reorders,
  };
}

let daemon;
let browser;
let page;
const errors = [];

describe("rank reordering panel of the job page", () => {
  before(async () => {
    const port = await freeUdpPort();
    daemon = await startDaemon({ sweeps: 1, args: ["--agent-listen", `127.0.0.1:${port}`, "--agent-address-file", "-"] });
    const ranks = [...Array(WORLD).keys()];
    await sendDatagrams(port, [
      ...ranks.map((r) => snapshot(R, r, [call0(r), call1(r)])),
      ...ranks.map((r) => snapshot(N, r, undefined)),
    ]);
    await jobFinished(daemon, R);
    await jobFinished(daemon, N);
    browser = await startBrowser();
    page = await newPage(browser, errors);
  });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
  });

  it("the API gives each rank's records as sent", async () => {
    const job = await daemon.api(`/jobs/${R}`);
    const got = job.processes.map((p) => [p.rank, p.reorders.map((r) => [r.index, r.method, r.old_rank, r.new_rank, r.inter_node_before, r.inter_node_after, r.since ?? ""])]);
    assert.deepEqual(
      got.sort((a, b) => a[0] - b[0]),
      [0, 1, 2, 3].map((r) => [r, [[0, "scotch", r, newRank[r], 1_966_080, 655_360, ""], [1, "kept", newRank[r], newRank[r], 655_360, 655_360, "phase2"]]]),
    );
    const none = await daemon.api(`/jobs/${N}`);
    assert.ok(none.processes.every((p) => !p.reorders || p.reorders.length === 0));
  });

  it("shows each call once, joined over the ranks, with the figures sent", async () => {
    await page.goto(`${daemon.base}/jobs/${R}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    await page.locator(".reorder-panel").waitFor({ state: "visible" });
    const calls = await page.locator(".reorder-panel .reorder").evaluateAll((ds) => ds.map((d) => ({ method: d.dataset.method, text: d.innerText })));
    assert.deepEqual(calls.map((c) => c.method), ["scotch", "kept"]);
    // 1,966,080 -> 655,360 of 2,621,440 bytes: 66.7% less; the slowest rank's call, 0.007 s.
    assert.match(calls[0].text, /MPI_COMM_WORLD of 4 ranks on 2 nodes · Scotch's order: 2 of 4 ranks moved/);
    assert.match(calls[0].text, /Predicted inter-node bytes 1\.97 MB → 655 KB \(66\.7% less\) of 2\.62 MB, from the matrix since MPI_Init; the call took 0\.007 s \(mapping 0\.001 s\); 4 of 4 ranks reported it\./);
    assert.match(calls[0].text, /World rank: old → new rank: 0: 0→0, 1: 1→2, 2: 2→1, 3: 3→3/);
    assert.match(calls[1].text, /a communicator of 4 ranks on 2 nodes · order kept: nothing to gain/);
    assert.match(calls[1].text, /Predicted inter-node bytes 655 KB → 655 KB \(0\.0% less\) of 1\.31 MB, from the matrix since mark "phase2"/);
    assert.doesNotMatch(calls[1].text, /World rank:/);
    assert.deepEqual(errors, []);
  });

  it("hides the panel for a job that never reordered", async () => {
    await page.goto(`${daemon.base}/jobs/${N}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    assert.equal(await page.locator(".reorder-panel").isHidden(), true);
    assert.deepEqual(errors, []);
  });
});
