// Who sees what, through the UI, against a real daemon with local accounts
// (`netloom user add ... --password-stdin`, `serve --users`): an
// administrator "ada" and a regular user "nobody". Two real Open MPI jobs
// run under the agent: one as root (ranks on n1, n2) and one as the Unix
// user nobody (setpriv; ranks on n2, n3), so the agent reports a different
// user for each and the two share the n2 host link. The tests sign in
// through the login page as each person and check what they see, the
// 401 → login → back redirect, signing out, the jobs list's time filter,
// the back-pressure banner, and that no page of either role triggers a
// Content-Security-Policy violation. Screenshots go to test-results/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { freeUdpPort, have, jobFinished, mpiSkip, netloomBin, newContext, newPage, shot, startBrowser, startDaemon, startJob, webDir } from "./harness.mjs";

const ADMIN = { name: "ada", password: "ada-e2e-secret-1", admin: true };
// The regular user is named after the Unix account their job runs as: the
// agent reports the job's user from its real UID.
const USER = { name: "nobody", password: "nobody-e2e-secret-2", admin: false };
const ROOT_JOB = `web-auth-root-${process.pid}`;
const USER_JOB = `web-auth-user-${process.pid}`;
const ITERS = 20;
const mpiDir = join(webDir, "test", "mpi");

const bin = netloomBin;
const skip =
  mpiSkip() ||
  (process.getuid?.() !== 0 || !have("setpriv") ? "needs root and setpriv to run a job as another Unix user" : false);

let daemon;
let browser;
let dir;
let agentPort;
const errors = [];
const pages = [];

/** Runs traffic.c under the agent; as `asUser` (a Unix account) when given. */
function runJob(id, np, nodeBase, ppn, asUser) {
  const run = [bin, "run", "--physical", "--daemon", `127.0.0.1:${agentPort}`, "--interval", "1s", "--job-id", id, "--", "mpirun", "--oversubscribe", "-np", String(np), join(mpiDir, "nodewrap.sh"), join(dir, "traffic"), String(ITERS)];
  const cmd = asUser ? ["setpriv", `--reuid=${asUser}`, `--regid=${asUser === "nobody" ? "nogroup" : asUser}`, "--clear-groups", ...run] : run;
  return startJob(id, cmd, { HOME: dir, NL_NODE_BASE: String(nodeBase), NL_PPN: String(ppn) }, { cwd: dir }).done;
}

const jobDone = (id) => jobFinished(daemon, id);

/** A page in a cookie jar of its own (one person), recording errors. */
async function personPage() {
  const ctx = await newContext(browser);
  const page = await newPage(browser, errors, ctx);
  pages.push(page);
  return page;
}

/** Signs in through the login form, with the keyboard. */
async function signInWithForm(page, who) {
  await page.getByLabel("User name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByLabel("Password").press("Enter");
}

const rowKeys = (page) => page.locator("tbody tr[data-key]").evaluateAll((rows) => rows.map((r) => r.dataset.key));
const tableIdle = (page) => page.waitForFunction(() => document.querySelector(".server-table")?.getAttribute("aria-busy") === "false");

describe("sign-in and roles", { skip }, () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "netloom-web-auth-"));
    chmodSync(dir, 0o755); // the job run as nobody reads its program here
    execFileSync("mpicc", ["-O1", "-o", join(dir, "traffic"), join(mpiDir, "traffic.c")]);
    agentPort = await freeUdpPort();
    daemon = await startDaemon({
      fabric: "sim:fat-tree:hosts=16,radix=8",
      sweeps: 2,
      accounts: [ADMIN, USER],
      args: ["--agent-listen", `127.0.0.1:${agentPort}`, "--agent-address-file", "-", "--job-timeout", "10s"],
    });
    browser = await startBrowser();
    // root's job: ranks 0-1 on n1, 2-3 on n2; nobody's: rank 0 on n2, 1 on n3.
    await Promise.all([runJob(ROOT_JOB, 4, 1, 2), runJob(USER_JOB, 2, 2, 1, "nobody")]);
    const [r, u] = [await jobDone(ROOT_JOB), await jobDone(USER_JOB)];
    assert.equal(r.job.user, "root");
    assert.equal(u.job.user, "nobody");
  });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  let user; // nobody's page, signed in through the form below
  const forbidden = []; // API answers of 403 while the user browsed

  it("sends a signed-out visitor to the login page and back to where they were going", async () => {
    user = await personPage();
    user.on("response", (r) => r.status() === 403 && r.url().includes("/api/") && forbidden.push(r.url()));
    const res = await user.goto(`${daemon.base}/jobs/${USER_JOB}?mclass=all`);
    assert.match(res.headers()["content-security-policy"], /style-src 'self'; /);
    await user.waitForFunction(() => location.pathname === "/login");
    const next = new URL(user.url()).searchParams.get("next");
    assert.equal(next, `/jobs/${USER_JOB}?mclass=all`);
    await user.getByRole("heading", { name: "Sign in to Netloom" }).waitFor();
    // Nothing of the app shows before signing in.
    assert.equal(await user.locator("nav.nav").isHidden(), true);
    assert.equal(await user.locator(".account").isHidden(), true);
    // The user-name field has the focus: the form works from the keyboard.
    assert.equal(await user.evaluate(() => document.activeElement?.id), "login-user");
    await shot(user, "login");

    // A wrong password: an error, still here, nothing signed in.
    await signInWithForm(user, { name: USER.name, password: "wrong" });
    await user.getByRole("alert").filter({ hasText: "Wrong user name or password." }).waitFor();
    assert.equal(new URL(user.url()).pathname, "/login");
    assert.equal(await user.getByLabel("Password").getAttribute("aria-invalid"), "true");
    await shot(user, "login-failed");

    await signInWithForm(user, USER);
    await user.waitForFunction((id) => location.pathname === `/jobs/${id}`, USER_JOB);
    assert.equal(new URL(user.url()).searchParams.get("mclass"), "all");
    await user.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    assert.equal(await user.locator(".who-user").innerText(), "nobody");
    assert.equal(await user.locator(".role-badge").getAttribute("data-role"), "user");
    assert.equal(await user.locator('[data-action="sign-out"]').isVisible(), true);
  });

  it("a user sees their own jobs only, and no fabric pages", async () => {
    // Navigation: Jobs only.
    for (const key of ["network", "errors", "events"]) assert.equal(await user.locator(`nav.nav a[data-key="${key}"]`).isHidden(), true, key);
    assert.equal(await user.locator('nav.nav a[data-key="jobs"]').isVisible(), true);
    await user.click('nav.nav a[data-key="jobs"]');
    await user.click('.seg[data-state="all"]');
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor();
    await tableIdle(user);
    assert.deepEqual(await rowKeys(user), [USER_JOB]);
    assert.equal(await user.locator("h1").innerText(), "Your MPI jobs");
    await shot(user, "user-jobs");

    // Another user's job does not exist for them.
    await user.goto(`${daemon.base}/jobs/${ROOT_JOB}`);
    await user.locator(".state.error").waitFor();
    assert.match(await user.locator(".state.error").innerText(), /no job/);

    // Fabric pages: a clear statement, not a broken page.
    for (const path of ["/network", "/errors", "/events", "/nodes/n1"]) {
      await user.goto(`${daemon.base}${path}`);
      await user.locator('[data-state="admin-only"]').waitFor();
      assert.match(await user.locator("h1").innerText(), /Only administrators can see the fabric/);
    }
    await shot(user, "user-admin-only");
    // "/" leads a user to their jobs.
    await user.goto(`${daemon.base}/`);
    await user.waitForFunction(() => location.pathname === "/jobs");
  });

  it("a user's job page has no map, and names other users' jobs on its links only as 'other job'", async () => {
    await user.goto(`${daemon.base}/jobs/${USER_JOB}`);
    await user.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    assert.equal(await user.locator("text=Show its nodes on the network map").count(), 0);
    // Node names are plain text: node pages are the fabric's.
    assert.equal(await user.locator('table[aria-label="Nodes of the job"] tbody a').count(), 0);
    const links = user.locator('table[aria-label="Links crossed by the job"] tbody tr');
    await links.first().waitFor();
    // Under netloom run --physical, Open MPI's monitoring tells what the library sent.
    assert.match(await user.locator(".traffic-model").innerText(), /as the MPI library sent it \(physical\)/);
    // n2's host link carries both jobs: root's shows as "other job", unlinked.
    const shared = links.filter({ has: user.locator(".anon-job") }).first();
    await shared.waitFor();
    assert.equal(await shared.locator(".anon-job").first().innerText(), "other job");
    assert.equal(await shared.locator(`a[href*="${ROOT_JOB}"], a[href*="other-"]`).count(), 0);
    assert.doesNotMatch(await user.locator(".page").innerText(), new RegExp(ROOT_JOB));
    await shot(user, "user-job");

    // Its link page: traffic and the by-job split, anonymized; no routes.
    await shared.locator("td:first-child a").click();
    await user.waitForFunction(() => location.pathname.startsWith("/links/"));
    // A finished job's link opens over the time the job ran.
    const q = new URL(user.url()).searchParams;
    const job = (await daemon.api(`/jobs/${USER_JOB}`)).job;
    assert.ok(Number(q.get("from")) <= Date.parse(job.start) / 1000 && Number(q.get("to")) >= Math.floor(Date.parse(job.end) / 1000), user.url());
    assert.equal(q.get("job"), USER_JOB);
    await user.locator(".page-head + .cards > .card").first().waitFor();
    assert.equal(await user.locator(".page-head + .cards > .card").count(), 2);
    await user.waitForFunction(() => document.querySelectorAll(".uplot").length >= 4, null, { timeout: 10_000 });
    const jobsTable = user.locator('table[aria-label="Jobs on this link"]');
    await jobsTable.locator("tbody tr").first().waitFor();
    const rows = await jobsTable.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => ({ text: tr.innerText, links: tr.querySelectorAll("a").length, buttons: tr.querySelectorAll("button").length, anon: !!tr.querySelector(".anon-job") })));
    const mine = rows.filter((r) => r.text.includes(USER_JOB));
    const others = rows.filter((r) => r.anon);
    assert.ok(mine.length > 0 && others.length > 0, JSON.stringify(rows));
    for (const r of mine) assert.deepEqual([r.links, r.buttons], [1, 1], r.text);
    for (const r of others) {
      assert.deepEqual([r.links, r.buttons], [0, 0], r.text);
      assert.match(r.text, /^other job/);
      assert.doesNotMatch(r.text, /root|other-\d/);
    }
    assert.equal(await user.locator("text=Routes crossing this link").count(), 0);
    assert.equal(await user.locator(".page-head .crumbs a").innerText(), "Jobs");
    await shot(user, "user-link");
    assert.deepEqual(forbidden, [], "the UI asked for nothing a user may not see");
  });

  it("an administrator sees every job and the whole fabric", async () => {
    const admin = await personPage();
    await admin.goto(`${daemon.base}/`);
    await admin.waitForFunction(() => location.pathname === "/login");
    assert.equal(new URL(admin.url()).searchParams.get("next"), null);
    await signInWithForm(admin, ADMIN);
    await admin.waitForFunction(() => location.pathname === "/network");
    await admin.waitForFunction(() => performance.getEntriesByName("netloom:map:first-frame").length > 0, null, { timeout: 20_000 });
    assert.equal(await admin.locator(".who-user").innerText(), "ada");
    assert.equal(await admin.locator(".role-badge").getAttribute("data-role"), "admin");
    for (const key of ["network", "jobs", "errors", "events"]) assert.equal(await admin.locator(`nav.nav a[data-key="${key}"]`).isVisible(), true, key);
    await admin.click('nav.nav a[data-key="jobs"]');
    await admin.click('.seg[data-state="all"]');
    await admin.locator(`tr[data-key="${ROOT_JOB}"]`).waitFor();
    await tableIdle(admin);
    assert.deepEqual((await rowKeys(admin)).sort(), [ROOT_JOB, USER_JOB].sort());
    assert.match(await admin.locator(`tr[data-key="${USER_JOB}"]`).innerText(), /nobody/);
    await shot(admin, "admin-jobs");

    // The user's job, as the admin sees it: its map link, and the root job named on the shared link.
    await admin.goto(`${daemon.base}/jobs/${USER_JOB}`);
    await admin.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    await admin.locator("text=Show its nodes on the network map").waitFor();
    const links = admin.locator('table[aria-label="Links crossed by the job"] tbody tr');
    const shared = links.filter({ has: admin.locator(`a[href^="/jobs/${ROOT_JOB}"]`) }).first();
    await shared.waitFor();
    assert.equal(await admin.locator(".anon-job").count(), 0);
    await shared.locator("td:first-child a").click();
    await admin.waitForFunction(() => location.pathname.startsWith("/links/"));
    const jobsTable = admin.locator('table[aria-label="Jobs on this link"]');
    await jobsTable.locator(`a[href^="/jobs/${ROOT_JOB}"]`).first().waitFor();
    await admin.locator(".route-dir table tbody tr").first().waitFor();
    for (const path of ["/errors", "/events"]) {
      await admin.goto(`${daemon.base}${path}`);
      await admin.locator("table.data").first().waitFor();
    }
    await admin.close();
  });

  it("the jobs list follows the header's time range (from/to in the URL and the request)", async () => {
    const requests = [];
    user.on("request", (r) => r.url().includes("/api/v1/jobs?") && requests.push(new URL(r.url()).searchParams));
    await user.goto(`${daemon.base}/jobs?state=all`);
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor();
    // The header's quick range: the last 15 minutes holds the job.
    await user.click('.seg[data-mode="range"]');
    await user.selectOption(".time-preset", "900");
    await user.waitForFunction(() => new URLSearchParams(location.search).has("from") && new URLSearchParams(location.search).has("to"));
    const url = new URL(user.url()).searchParams;
    assert.equal(Number(url.get("to")) - Number(url.get("from")), 900);
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor();
    const last = requests.at(-1);
    assert.equal(last.get("from"), url.get("from"));
    assert.equal(last.get("to"), url.get("to"));
    // A range that ended before the jobs started holds none.
    const start = Math.floor(new Date((await daemon.api(`/jobs/${USER_JOB}`)).job.start).getTime() / 1000);
    await user.goto(`${daemon.base}/jobs?from=${start - 7200}&to=${start - 3600}`);
    await user.locator(".empty-row", { hasText: "No job ran in this time range." }).waitFor();
    assert.equal(requests.at(-1).get("to"), String(start - 3600));
    await shot(user, "user-jobs-range");
  });

  it("shows the daemon's back-pressure warning on every page while it is behind", async () => {
    // The daemon's real /status, with "behind" added as a daemon that cannot
    // keep up would report it (making the real one fall behind is the
    // daemon's own test).
    await user.route("**/api/v1/status", async (route) => {
      const res = await route.fetch();
      const st = await res.json();
      st.behind = { since: new Date(Date.now() - 90_000).toISOString(), reasons: ["store write queue 240/256", "agent datagrams dropped: queue full"] };
      await route.fulfill({ response: res, json: st });
    });
    await user.goto(`${daemon.base}/jobs?state=all`);
    const banner = user.locator(".behind-banner");
    await banner.waitFor();
    assert.match(await banner.innerText(), /falling behind since .*store write queue 240\/256; agent datagrams dropped: queue full/);
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor(); // the page works under it
    await user.click(`tr[data-key="${USER_JOB}"] a`);
    await user.waitForSelector(".page[data-ready]", { timeout: 20_000 });
    assert.equal(await banner.isVisible(), true);
    await shot(user, "behind-banner");
    await user.unroute("**/api/v1/status");
    await user.waitForTimeout(2100); // navigation polls again after 2 s
    await user.click(".crumbs a");
    await user.waitForFunction(() => document.querySelector(".behind-banner")?.hidden === true);
  });

  it("an expired session sends the user to the login page and back", async () => {
    await user.goto(`${daemon.base}/jobs?state=all&sort=bytes&dir=asc`);
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor();
    // The session ends (cookie gone); the list's live refresh gets 401.
    await user.context().clearCookies();
    await user.waitForFunction(() => location.pathname === "/login", null, { timeout: 10_000 });
    assert.equal(new URL(user.url()).searchParams.get("next"), "/jobs?state=all&sort=bytes&dir=asc");
    assert.equal(await user.locator("nav.nav").isHidden(), true);
    await signInWithForm(user, USER);
    await user.waitForFunction(() => location.pathname === "/jobs");
    assert.equal(new URL(user.url()).search, "?state=all&sort=bytes&dir=asc");
    await user.locator(`tr[data-key="${USER_JOB}"]`).waitFor();
    // next= only leads to this site: elsewhere means home.
    for (const bad of ["https://evil.example/x", "//evil.example/x", "/\\evil.example"]) {
      await user.goto(`${daemon.base}/login?next=${encodeURIComponent(bad)}`);
      await user.waitForFunction(() => location.pathname === "/jobs");
      assert.equal(new URL(user.url()).origin, daemon.base);
    }
  });

  it("signs out with the CSRF token and ends the session", async () => {
    let logout = null;
    user.on("request", (r) => r.url().endsWith("/api/v1/auth/logout") && (logout = r));
    await user.click('[data-action="sign-out"]');
    await user.waitForFunction(() => location.pathname === "/login");
    assert.ok(logout, "POST /auth/logout sent");
    assert.equal(logout.method(), "POST");
    assert.match((await logout.allHeaders())["x-csrf-token"] ?? "", /.{16,}/);
    assert.equal((await logout.response()).status(), 204);
    assert.equal(await user.evaluate(() => fetch("/api/v1/auth/me").then((r) => r.status)), 401);
    await user.goto(`${daemon.base}/jobs`);
    await user.waitForFunction(() => location.pathname === "/login" && new URLSearchParams(location.search).get("next") === "/jobs");
  });

  it("explains a login refused for too many attempts", async () => {
    // Sign-ins are limited per address (a burst, then one every 2 s).
    for (let i = 0; i < 15; i++) {
      await signInWithForm(user, { name: USER.name, password: `wrong-${i}` });
      const alert = user.locator("#login-error");
      await user.waitForFunction(() => /Wrong|Too many/.test(document.querySelector("#login-error")?.textContent ?? ""));
      if (/Too many/.test(await alert.innerText())) break;
      await user.evaluate(() => (document.querySelector("#login-error").textContent = ""));
    }
    assert.match(await user.locator("#login-error").innerText(), /Too many sign-in attempts/);
    await shot(user, "login-rate-limited");
  });

  it("raised no page errors and no Content-Security-Policy violations", () => {
    const csp = pages.flatMap((p) => p.csp);
    assert.deepEqual(csp, []);
    // Refused logins, the expired session and the other user's job log
    // failed requests (401, 429, 404) to the console: those are expected.
    assert.deepEqual(
      errors.filter((e) => !/GL Driver|WebGL/.test(e) && !/^Failed to load resource: the server responded with a status of (401|404|429)\b/.test(e)),
      [],
    );
  });
});
