// UI benchmark on the simulated Stampede fabric (6,541 hosts, 764
// switches, 16,893 links): server-side layout time, time from navigation to
// the map's first full frame, and the time to apply one live colour update
// to every link, all measured in one run. Usage (after make build):
//
//	node bench/ui/bench.mjs [--runs 5] [--updates 5] [--fabric sim:stampede]
//
// First frame is performance.mark('netloom:map:first-frame') relative to
// navigation start in a fresh browser context (nothing cached); an update
// is performance.measure('netloom:map:update'): decoding the SSE message,
// recomputing colours and redrawing the map.
import { parseArgs } from "node:util";
import { startBrowser, startDaemon } from "../../web/test/harness.mjs";

const { values: opt } = parseArgs({
  options: {
    runs: { type: "string", default: "5" },
    updates: { type: "string", default: "5" },
    fabric: { type: "string", default: "sim:stampede" },
    sweep: { type: "string", default: "5s" },
  },
});
const runs = Number(opt.runs);
const updates = Number(opt.updates);

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, min: s[0], median: q(0.5), max: s[s.length - 1] };
};
const fmt = (st) => `median ${st.median.toFixed(1)} ms (min ${st.min.toFixed(1)}, max ${st.max.toFixed(1)}, n=${st.n})`;

const t0 = Date.now();
const daemon = await startDaemon({ fabric: opt.fabric, sweep: opt.sweep, sweeps: 2 });
console.log(`daemon up with ${opt.fabric} after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const status = await daemon.api("/status");
console.log(`fabric: ${status.topology.cas} hosts, ${status.topology.switches} switches, ${status.topology.links} links`);

// Server layout: computed once per topology version; the first request pays for it.
const l0 = performance.now();
const res = await fetch(`${daemon.base}/api/v1/fabric/layout`, { headers: { "Accept-Encoding": "gzip" } });
await res.arrayBuffer();
const wireLen = Number(res.headers.get("content-length") ?? NaN);
const firstFetch = performance.now() - l0;
const timing = res.headers.get("server-timing") ?? "";
const layoutMs = Number(/dur=([\d.]+)/.exec(timing)?.[1] ?? NaN);
const warm = [];
for (let i = 0; i < 5; i++) {
  const w0 = performance.now();
  await (await fetch(`${daemon.base}/api/v1/fabric/layout`)).arrayBuffer();
  warm.push(performance.now() - w0);
}
const rawLen = (await (await fetch(`${daemon.base}/api/v1/fabric/layout`, { headers: { "Accept-Encoding": "identity" } })).arrayBuffer()).byteLength;
console.log(`server layout: computed in ${layoutMs.toFixed(2)} ms; first request ${firstFetch.toFixed(1)} ms; cached ${fmt(stats(warm))}; ${(rawLen / 1024).toFixed(0)} KiB JSON, ${(wireLen / 1024).toFixed(0)} KiB gzip on the wire`);

const browser = await startBrowser();
const errors = [];
const firstFrames = [];
const updateTimes = [];
for (let r = 0; r < runs; r++) {
  const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${daemon.base}/network`);
  await page.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0, null, { timeout: 60_000 });
  firstFrames.push(await page.evaluate(() => performance.getEntriesByName("netloom:map:first-frame")[0].startTime));
  if (r === 0) {
    // Live updates: skip the one applied with the first frame.
    const base = await page.evaluate(() => window.__netloomMap.updates);
    await page.waitForFunction((want) => window.__netloomMap.updates >= want, base + updates, { timeout: 60_000 + updates * 15_000, polling: 500 });
    const ms = await page.evaluate(() => performance.getEntriesByName("netloom:map:update").map((e) => e.duration));
    updateTimes.push(...ms.slice(base));
  }
  await ctx.close();
}
console.log(`map first frame (navigation → netloom:map:first-frame): ${fmt(stats(firstFrames))}; target < 2000 ms`);
console.log(`live colour update of all ${status.topology.links} links (2 directions each): ${fmt(stats(updateTimes))}; target < 100 ms`);
if (errors.length) console.log(`page errors: ${errors.join("; ")}`);
await browser.close();
await daemon.stop();
