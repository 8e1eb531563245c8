// The job page's GPU panels ("GPU buffers" and "NCCL operations", from GET
// /jobs/{job}/gpu) against a real daemon fed agent datagrams with a GPU
// section (test/agentwire.mjs: no GPU needed): each figure the panels show
// equals what the datagrams carried, each panel states its source, and a
// job without GPU data shows neither.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sendDatagrams } from "./agentwire.mjs";
import { freeUdpPort, jobFinished, newPage, shot, startBrowser, startDaemon } from "./harness.mjs";

const G = `web-gpu-${process.pid}`;
const C = `web-cpu-${process.pid}`;
const COMM = 0xfedcba9876543210n;
const MIB = 1 << 20;

const t = (bytes, msgs) => ({ bytes, msgs });

/** Each rank's final snapshot: node, MPI functions, GPU section. */
function snapshot(job, rank, world, node, functions, gpu) {
  const now = BigInt(Date.now()) * 1_000_000n;
  return {
    version: 1, job_id: job, rank, world_size: world, seq: 0, chunk: 0, chunks: 1, final: true,
    start_unix_ns: now - 10_000_000_000n, time_unix_ns: now, interval_ns: 1_000_000_000,
    process: { node, host: node, pid: 1000 + rank, mpi_library: "Open MPI 4.1.6", program: "gpuapp", user: "root", wall_seconds: 10, mpi_seconds: 1 },
    functions, gpu,
  };
}

// Ranks 0 and 1 on n1, rank 2 on n2 (hosts of the simulated fabric).
//   0 -> 1: device 8192 B / 2 into device           D->D 8192/2 intra-node, exact
//   0 -> 2: pinned 3000/3 into pageable 1000/1 + managed 2000/2
//                                                   H->H 1000/1, H->D 2000/2 inter-node, exact
//   1 -> 2: pageable 100/1 + device 300/3 into pinned 200/2 + device 200/2
//                                                   mixed: H->? 100/1, D->? 300/3, ?->H 200/2, ?->D 200/2
//   2 -> 1: device 500/5 into device                D->D 500/5 inter-node, exact (D->D in all: 8692/7)
// Ranks 0 and 1: ten 1 MiB NCCL all-reduces each (RING, SIMPLE), 5 and 7 ms.
const allreduce = (rank, ns) => [{ comm: COMM, comm_rank: rank, comm_size: 2, name: "AllReduce", algorithm: "RING", protocol: "SIMPLE", calls: 10, bytes: 10 * MIB, time_ns: ns }];
const gpuJob = [
  snapshot(G, 0, 3, "n1", [{ name: "MPI_Send", calls: 5, time_ns: 1e6, bytes_sent: 11192 }, { name: "ncclAllReduce", calls: 10, time_ns: 5e6, bytes_sent: 10 * MIB }], {
    probed: true,
    functions: [{ name: "MPI_Send", send: { pinned: t(3000, 3), device: t(8192, 2) } }],
    peers: [{ peer: 1, sent_from: { device: t(8192, 2) } }, { peer: 2, sent_from: { pinned: t(3000, 3) } }],
    nccl_ops: allreduce(0, 5e6), nccl_version: "2.28.9", nccl_profiler_interface: 5,
  }),
  snapshot(G, 1, 3, "n1", [{ name: "MPI_Recv", calls: 7, time_ns: 2e6, bytes_received: 8692 }, { name: "MPI_Send", calls: 4, time_ns: 1e6, bytes_sent: 400 }, { name: "ncclAllReduce", calls: 10, time_ns: 7e6, bytes_sent: 10 * MIB }], {
    probed: true,
    functions: [{ name: "MPI_Recv", recv: { device: t(8692, 7) } }, { name: "MPI_Send", send: { pageable: t(100, 1), device: t(300, 3) } }],
    peers: [{ peer: 0, received_into: { device: t(8192, 2) } }, { peer: 2, sent_from: { pageable: t(100, 1), device: t(300, 3) }, received_into: { device: t(500, 5) } }],
    nccl_ops: allreduce(1, 7e6), nccl_version: "2.28.9", nccl_profiler_interface: 5,
  }),
  snapshot(G, 2, 3, "n2", [{ name: "MPI_Recv", calls: 7, time_ns: 3e6, bytes_received: 3400 }, { name: "MPI_Send", calls: 5, time_ns: 1e6, bytes_sent: 500 }], {
    probed: true,
    functions: [{ name: "MPI_Recv", recv: { pageable: t(1000, 1), pinned: t(200, 2), device: t(200, 2), managed: t(2000, 2) } }, { name: "MPI_Send", send: { device: t(500, 5) } }],
    peers: [{ peer: 0, received_into: { pageable: t(1000, 1), managed: t(2000, 2) } }, { peer: 1, received_into: { pinned: t(200, 2), device: t(200, 2) }, sent_from: { device: t(500, 5) } }],
  }),
];
const cpuJob = [0, 1].map((r) => snapshot(C, r, 2, "n3", [{ name: "MPI_Send", calls: 1, bytes_sent: 8 }], undefined));

// The paths table as sent: [path, where, bytes, messages, split].
const wantPaths = [
  ["H->H", "inter-node", 1000, 1, "exact"],
  ["H->D", "inter-node", 2000, 2, "exact"],
  ["D->D", "intra-node", 8192, 2, "exact"],
  ["D->D", "inter-node", 500, 5, "exact"],
  ["H->?", "inter-node", 100, 1, "mixed: not determined"],
  ["D->?", "inter-node", 300, 3, "mixed: not determined"],
  ["?->H", "inter-node", 200, 2, "mixed: not determined"],
  ["?->D", "inter-node", 200, 2, "mixed: not determined"],
];

let daemon;
let browser;
let page;
const errors = [];

describe("GPU panels of the job page", () => {
  before(async () => {
    const port = await freeUdpPort();
    daemon = await startDaemon({ sweeps: 1, args: ["--agent-listen", `127.0.0.1:${port}`, "--agent-address-file", "-"] });
    await sendDatagrams(port, [...gpuJob, ...cpuJob]);
    await jobFinished(daemon, G);
    await jobFinished(daemon, C);
    browser = await startBrowser();
    page = await newPage(browser, errors);
  });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
  });

  it("the API gives the figures sent", async () => {
    const { gpu } = await daemon.api(`/jobs/${G}/gpu`);
    const rows = gpu.buffers.paths.map((r) => [r.path, r.locality, r.bytes, r.msgs, r.split === "mixed" ? "mixed: not determined" : r.split]);
    assert.deepEqual(rows, wantPaths);
    assert.equal(gpu.buffers.source, "agent buffer probe (cuPointerGetAttributes)");
    assert.deepEqual(gpu.nccl.ops, [{ comm: "fedcba9876543210", comm_size: 2, name: "AllReduce", algorithm: "RING", protocol: "SIMPLE", ranks: 2, calls: 20, bytes: 20 * MIB, time_ns: 12e6 }]);
    assert.equal(gpu.nccl.nccl_peers_from, "none reported");
  });

  it("shows the paths, the buffer kinds per function and the NCCL operations as sent", async () => {
    await page.goto(`${daemon.base}/jobs/${G}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    await page.locator(".gpu-panel").waitFor({ state: "visible" });
    assert.match(await page.locator(".gpu-panel .gpu-source").innerText(), /Source: agent buffer probe \(cuPointerGetAttributes\); 3 of 3 ranks probed/);
    const rows = await page.locator('table[aria-label="Paths of the MPI messages"] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [tr.cells[0].innerText, tr.cells[1].innerText, Number(tr.cells[2].querySelector("[data-bytes]").dataset.bytes), Number(tr.cells[3].innerText.replace(/,/g, "")), tr.cells[4].innerText]),
    );
    const perLocality = rows.filter((r) => r[1] !== "all (total)");
    assert.deepEqual(perLocality, wantPaths);
    // A path's total over localities, where it took several.
    assert.deepEqual(
      rows.filter((r) => r[1] === "all (total)"),
      [["D->D", "all (total)", 8692, 7, "exact"]],
    );
    // The page shows bytes as kB; its title has them exact.
    assert.equal(await page.locator('table[aria-label="Paths of the MPI messages"] [data-bytes="8192"]').first().innerText(), "8.19 KB");

    // Buffer kinds per function: bytes sent from, then received into
    // pageable, pinned, device and managed memory, over ranks.
    const fns = await page.locator('table[aria-label="Buffer kinds per MPI function"] tbody tr').evaluateAll((trs) =>
      Object.fromEntries(trs.map((tr) => [tr.cells[0].innerText, [Number(tr.cells[1].innerText), ...Array.from(tr.cells).slice(2).map((c) => Number(c.querySelector("[data-bytes]").dataset.bytes))]])),
    );
    assert.deepEqual(fns, {
      MPI_Send: [3, 100, 3000, 8192 + 300 + 500, 0, 0, 0, 0, 0],
      MPI_Recv: [2, 0, 0, 0, 0, 1000, 200, 8692 + 200, 2000],
    });

    // NCCL operations, summed over the two ranks.
    await page.locator(".nccl-panel").waitFor({ state: "visible" });
    const note = await page.locator(".nccl-panel .nccl-source").innerText();
    assert.match(note, /Source: NCCL profiler plugin \(libnetloom-nccl\.so\); 2 ranks; NCCL 2\.28\.9; profiler interface v5/);
    assert.match(note, /Network bytes per peer: none reported; link attribution: not reported by NCCL's transport: links not attributed/);
    const ops = await page.locator('table[aria-label="NCCL operations"] tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...Array.from(tr.cells).slice(0, 7).map((c) => c.innerText), Number(tr.cells[7].querySelector("[data-bytes]").dataset.bytes), Number(tr.cells[8].querySelector("[data-ns]").dataset.ns)]),
    );
    assert.deepEqual(ops, [["fedcba9876543210", "2", "AllReduce", "RING", "SIMPLE", "2", "20", 20 * MIB, 12e6]]);

    // The NCCL ranks' function rows sit in the MPI functions table as they came.
    const fnRow = await page.locator('table[aria-label="MPI functions"] tbody tr', { hasText: "ncclAllReduce" }).innerText();
    assert.match(fnRow, /ncclAllReduce\s+20\b/);
    await page.locator(".gpu-panel").scrollIntoViewIfNeeded();
    await shot(page, "job-gpu-panels");
    assert.deepEqual(errors, []);
  });

  it("a job without GPU data shows neither panel", async () => {
    await page.goto(`${daemon.base}/jobs/${C}`);
    await page.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    assert.equal(await page.locator(".gpu-panel").isHidden(), true);
    assert.equal(await page.locator(".nccl-panel").isHidden(), true);
    const { gpu } = await daemon.api(`/jobs/${C}/gpu`);
    assert.equal(gpu.buffers.not_probed, "no rank had CUDA loaded");
    assert.deepEqual(errors, []);
  });
});
