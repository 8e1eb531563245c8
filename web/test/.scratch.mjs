import { startBrowser, newPage } from "./harness.mjs";
const base = "http://127.0.0.1:18466";
const b = await startBrowser();
const errors = [];
const p = await newPage(b, errors);
for (const [name, path, wait] of [["jobs", "/jobs?state=all", "table.data tbody tr[data-key]"], ["job", "/jobs/webA", ".heatmap canvas"], ["map", "/network?job=webA", ".job-bar a"]]) {
  await p.goto(base + path);
  await p.locator(wait).first().waitFor({ timeout: 10000 });
  await p.waitForTimeout(1200);
  if (name === "job") { const c = p.locator(".heatmap canvas").first(); const bb = await c.boundingBox(); await p.mouse.move(bb.x + bb.width * 0.9, bb.y + bb.height * 0.1); }
  await p.screenshot({ path: `/tmp/nlt/shots/${name}.png`, fullPage: name !== "map" });
}
console.log("errors", errors);
await b.close();
