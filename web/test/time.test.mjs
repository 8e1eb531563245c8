// One way to write time, and charts that respect their data (issue 43
// items 2 and 4), against a real daemon on the synthetic fat tree in a
// browser whose zone is Asia/Kolkata (UTC+05:30, so the browser's zone and
// UTC differ by a non-whole hour): the times a page writes parse back to
// the API's timestamps in the browser's zone, and in UTC after the
// header's zone switch, which is remembered; the time fields show and read
// the chosen zone; the charts' axes (recorded as the browser paints them,
// canvastext.mjs) carry whole-number ticks for counters, a unit on each
// axis, and no label overlapping another or cut by the canvas's edge, at
// 1,440 and at 390 px.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { hoverTime, pageTime, startBrowser, startDaemon, until } from "./harness.mjs";
import { canvasTexts, overlaps, recordCanvasText } from "./canvastext.mjs";

let daemon;
let browser;
let context;
let page;
const errors = [];
let link;
let host;
let sw;
let T; // a past time (Unix seconds) with samples before it

const ZONE = "UTC+05:30";
const TIME = /(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC(?:[+-]\d\d:\d\d)?)/;

/** "2026-11-29 04:16:17 UTC+05:30" (or "... UTC") to Unix seconds, without the page's code. */
function parseShown(s) {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) UTC([+-]\d\d:\d\d)?$/.exec(s);
  assert.ok(m, `a time as the pages write it: ${s}`);
  return Date.parse(`${m[1]}T${m[2]}${m[3] ?? "Z"}`) / 1000;
}

/** A time field's value read in a zone ("+05:30" or "Z"). */
function parseField(v, zone) {
  assert.match(v, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
  return Date.parse(`${v.replace(" ", "T")}${zone}`) / 1000;
}

const apiSeconds = (iso) => Math.floor(Date.parse(iso) / 1000);

before(async () => {
  daemon = await startDaemon({ sweeps: 6 });
  browser = await startBrowser();
  context = await browser.newContext({ viewport: { width: 1440, height: 900 }, timezoneId: "Asia/Kolkata" });
  await recordCanvasText(context);
  page = await context.newPage();
  page.on("pageerror", (e) => errors.push(e.message));
  const links = (await daemon.api("/fabric/links")).links;
  const nodes = (await daemon.api("/fabric/nodes")).nodes;
  host = nodes.find((n) => n.type !== "switch");
  sw = nodes.find((n) => n.type === "switch");
  link = links.find((l) => l.a.guid === host.guid || l.b.guid === host.guid);
  T = Math.floor(Date.now() / 1000) - 1;
});

after(async () => {
  await browser?.close();
  await daemon?.stop();
});

describe("time", () => {
  it("writes the API's times in the browser's zone, and in UTC after the switch, remembered", async () => {
    const api = await daemon.api(`/links/${link.id}?at=${T}`);
    await page.goto(`${daemon.base}/links/${link.id}?at=${T}`);
    const note = page.locator('.card-note[data-window="sweep"]').first();
    await note.waitFor();
    const zoneBtn = page.locator(".zone-toggle");
    assert.equal(await zoneBtn.innerText(), ZONE);
    assert.equal(await zoneBtn.getAttribute("aria-pressed"), "false");

    const shownNote = TIME.exec(await note.innerText())[1];
    assert.equal(parseShown(shownNote), apiSeconds(api.at));
    assert.equal(shownNote, await pageTime(page, api.at));
    assert.ok(shownNote.endsWith(` ${ZONE}`));
    const summary = await page.locator(".time-summary").innerText();
    assert.equal(parseShown(TIME.exec(summary)[1]), T);
    const field = page.locator('.time-fields input[aria-label^="Show the fabric as it was at"]');
    assert.equal(await field.getAttribute("aria-label"), `Show the fabric as it was at (${ZONE})`);
    assert.equal(parseField(await field.inputValue(), "+05:30"), T);

    // One click: UTC everywhere on the page.
    await zoneBtn.click();
    await until(async () => (await zoneBtn.innerText()) === "UTC", "the zone switch at UTC");
    assert.equal(await zoneBtn.getAttribute("aria-pressed"), "true");
    await until(async () => (await note.innerText()).includes(" UTC;"), "the note in UTC");
    const utcNote = TIME.exec(await note.innerText())[1];
    assert.equal(parseShown(utcNote), apiSeconds(api.at));
    assert.equal(utcNote, await pageTime(page, api.at, true));
    assert.equal(parseShown(TIME.exec(await page.locator(".time-summary").innerText())[1]), T);
    assert.equal(parseField(await field.inputValue(), "Z"), T);

    // Remembered: a new page load keeps UTC.
    await page.reload();
    await note.waitFor();
    assert.equal(await zoneBtn.innerText(), "UTC");
    assert.equal(TIME.exec(await note.innerText())[1], utcNote);
  });

  it("reads a time field in the chosen zone and names a field that holds no time", async () => {
    await page.goto(`${daemon.base}/links/${link.id}?at=${T}`);
    const field = page.locator('.time-fields input[aria-label^="Show the fabric as it was at"]');
    await field.waitFor();
    assert.equal(await page.locator(".zone-toggle").innerText(), "UTC");
    // T - 90 s written in UTC.
    const d = new Date((T - 90) * 1000);
    const p = (n) => String(n).padStart(2, "0");
    await field.fill(`${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`);
    await page.getByRole("button", { name: "Apply" }).click();
    await page.waitForFunction((want) => new URLSearchParams(location.search).get("at") === String(want), T - 90);

    await field.fill("2026-02-30 10:00:00");
    await page.getByRole("button", { name: "Apply" }).click();
    assert.equal(await field.getAttribute("aria-invalid"), "true");
    assert.match(await page.locator(".time-summary").innerText(), /^Time: write the time as YYYY-MM-DD HH:MM:SS$/);
    assert.equal(new URL(page.url()).searchParams.get("at"), String(T - 90));

    // Back to the browser's zone: the field shows the same instant in it.
    await page.locator(".zone-toggle").click();
    await until(async () => (await page.locator(".zone-toggle").innerText()) === ZONE, "the switch back at the browser's zone");
    assert.equal(parseField(await field.inputValue(), "+05:30"), T - 90);
  });

  it("writes the chart legend's time as the API's sample time", async () => {
    const from = T - 20;
    await page.goto(`${daemon.base}/links/${link.id}?from=${from}&to=${T}`);
    const chart = page.locator("figure.chart").first();
    await chart.locator(".u-over").waitFor();
    const counters = await daemon.api(`/links/${link.id}/counters?from=${from}&to=${T}`);
    const time = counters.series[0].time;
    // The pointer on the middle sample, where the chart's axis places it.
    const i = Math.floor(time.length / 2);
    await hoverTime(page, chart, time[i]);
    const shown = await until(async () => {
      const v = await chart.locator("tr.u-series").first().locator(".u-value").textContent();
      return TIME.test(v) ? v : false;
    }, `the legend's time (samples at ${time.join(", ")})`);
    assert.equal(parseShown(shown), Math.floor(time[i]));
    assert.equal(shown, await pageTime(page, time[i]));
  });
});

/** Each chart's painted texts, sorted into the y axis's values, its unit
 * and the rest, with the plot's box (canvas pixels). */
async function chartAxes(figure) {
  const [c] = await canvasTexts(figure.locator(".uplot canvas"));
  const over = await figure.locator(".u-over").boundingBox();
  const canvas = await figure.locator(".uplot canvas").boundingBox();
  const left = (over.x - canvas.x) / c.sx;
  const bottom = (over.y + over.height - canvas.y) / c.sy;
  const yTexts = c.texts.filter((t) => t.x1 <= left + 1 && !t.rotated);
  const vertical = c.texts.filter((t) => t.rotated);
  const xTexts = c.texts.filter((t) => t.y0 >= bottom - 1);
  return { c, yTexts, vertical, xTexts };
}

async function checkCharts(path, want) {
  await page.goto(`${daemon.base}${path}`);
  const figures = page.locator("figure.chart");
  await until(async () => (await page.locator("figure.chart .u-over").count()) === (await figures.count()) && (await figures.count()) >= 4, `the charts of ${path}`);
  await page.waitForTimeout(300); // a resize redraw settles
  const out = {};
  for (let k = 0; k < (await figures.count()); k++) {
    const fig = figures.nth(k);
    const title = await fig.locator("figcaption").innerText();
    const { c, yTexts, vertical, xTexts } = await chartAxes(fig);
    assert.ok(c.texts.length > 4, `${title}: axis labels painted`);
    assert.deepEqual(overlaps(c.texts), [], `${title} at ${path}: no label over another`);
    for (const t of c.texts) {
      assert.ok(t.x0 >= 0 && t.y0 >= 0 && t.x1 <= c.width && t.y1 <= c.height, `${title}: "${t.text}" inside the canvas (${t.x0.toFixed(1)},${t.y0.toFixed(1)})-(${t.x1.toFixed(1)},${t.y1.toFixed(1)}) of ${c.width}x${c.height}`);
    }
    // The y axis's unit along it, the time axis's zone under it.
    const unit = vertical.map((t) => t.text);
    assert.equal(unit.length, 1, `${title}: one unit on the y axis (${unit})`);
    assert.ok(c.texts.some((t) => /^time \(UTC(\+05:30)?\)$/.test(t.text)), `${title}: the time axis says its zone`);
    for (const t of xTexts.filter((t) => !t.text.startsWith("time"))) assert.match(t.text, /^(\d\d:\d\d(:\d\d)?|\d{4}-\d\d-\d\d)$/, `${title}: a time tick`);
    out[title] = { unit: unit[0], ticks: yTexts.map((t) => t.text) };
  }
  for (const [title, w] of Object.entries(want)) {
    assert.ok(out[title], `chart ${title} on ${path} (have ${Object.keys(out)})`);
    assert.equal(out[title].unit, w.unit, `${title}'s unit`);
    if (w.integer) {
      assert.ok(out[title].ticks.length >= 2, `${title}: ticks ${out[title].ticks}`);
      for (const v of out[title].ticks) assert.match(v, /^\d+(\.\d+)?[KMBT]?$|^\d+$/, `${title}: tick ${v}`);
      for (const v of out[title].ticks.filter((v) => /^\d+(\.\d+)?$/.test(v))) assert.ok(Number.isInteger(Number(v)), `${title}: tick ${v} is a whole number`);
    }
  }
  return out;
}

describe("charts", () => {
  const linkWant = {
    "Traffic per direction": { unit: "B/s" },
    "Utilization, % of capacity": { unit: "%" },
    "Errors received per interval": { unit: "errors", integer: true },
    "Transmit wait per interval (ticks)": { unit: "ticks", integer: true },
  };
  const nodeWant = {
    "Errors per interval, all ports": { unit: "errors", integer: true },
    "Transmit wait per interval, all ports": { unit: "ticks", integer: true },
  };

  it("counters tick at whole numbers, every axis has its unit, no label overlaps or is cut (1,440 px)", async () => {
    const range = `?from=${T - 30}&to=${T}`;
    const l = await checkCharts(`/links/${link.id}${range}`, linkWant);
    // The link has no errors: its axis is 0 and 1, never 0.2, 0.4, ...
    assert.deepEqual(l["Errors received per interval"].ticks, ["0", "1"]);
    await checkCharts(`/nodes/${sw.guid}${range}`, nodeWant);
  });

  it("the same at a phone's 390 px", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const range = `?from=${T - 30}&to=${T}`;
    await checkCharts(`/links/${link.id}${range}`, linkWant);
    await checkCharts(`/nodes/${sw.guid}${range}`, nodeWant);
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  it("no page errors", () => {
    assert.deepEqual(errors, []);
  });
});
