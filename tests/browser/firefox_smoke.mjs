// The console in Firefox: a smoke run driven by puppeteer-core over
// WebDriver BiDi (the protocol stock Firefox speaks; no geckodriver, and
// puppeteer-core never downloads a browser).
//
//   node firefox_smoke.mjs CONSOLE_URL OUT_DIR [--provider UUID] [--why QUERY]
//                          [--firefox PATH] [--user NAME]
//
// It opens CONSOLE_URL (e.g. http://127.0.0.1:PORT/console/) in headless
// Firefox, signs in (noauth2), waits for the cloud view, opens one
// provider's page (by clicking its link in the cloud view) and the "why no
// valid host" page for QUERY (default resources=VCPU:1), and reads what
// each draws. It saves firefox-cloud.png, firefox-provider.png and
// firefox-why.png in OUT_DIR, then checks that the page's CSP violations
// would be seen (a style attribute set on purpose in a second tab).
//
// It prints one JSON object on stdout: what it read, the console messages,
// the uncaught errors, the CSP violations and the failed requests. The exit
// code is 0 only when every step finished with no uncaught error, no CSP
// violation and no failed request; the comparison of the numbers with the
// API is the caller's (test_firefox.py).

import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const WAIT = 20000; // ms, for each thing waited for
const VIEWPORT = { width: 1280, height: 900 };
const CSP = /Content[- ]Security[- ]Policy/i;

function parseArgs(argv) {
  const positional = [];
  const options = {
    provider: null,
    why: "resources=VCPU:1",
    firefox: process.env.FIREFOX || "/usr/bin/firefox-esr",
    user: "admin",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg.startsWith("--")) {
      const name = arg.slice(2);
      if (!(name in options) || i + 1 >= argv.length) usage(`bad option ${arg}`);
      options[name] = argv[++i];
    } else positional.push(arg);
  }
  if (positional.length !== 2) usage("CONSOLE_URL and OUT_DIR are needed");
  let [url, out] = positional;
  url = url.replace(/#.*$/, "");
  if (!url.endsWith("/")) url += "/";
  return { url, out, ...options };
}

function usage(why) {
  process.stderr.write(
    `${why}\nusage: node firefox_smoke.mjs CONSOLE_URL OUT_DIR ` +
      "[--provider UUID] [--why QUERY] [--firefox PATH] [--user NAME]\n",
  );
  process.exit(2);
}

// Installed in every document before its own scripts: CSP violations as
// the page sees them (the console message for one is the browser's own
// and may not reach the BiDi log).
function watchViolations() {
  window.__cspViolations = [];
  document.addEventListener("securitypolicyviolation", (event) => {
    window.__cspViolations.push(
      `${event.violatedDirective} blocked ${event.blockedURI || "inline"} ` +
        `at ${event.sourceFile || "?"}:${event.lineNumber}:${event.columnNumber}`,
    );
  });
}

const READ_CLOUD = (chosen) => {
  const text = (el) => (el ? el.textContent : null);
  const rows = {};
  for (const li of document.querySelectorAll("li.provider")) {
    const mine = {};
    for (const tr of li.querySelectorAll(":scope > .card tr[data-rc]")) {
      mine[tr.dataset.rc] = [text(tr.querySelector(".used-cap")), text(tr.querySelector(".inventory"))];
    }
    rows[li.dataset.uuid] = mine;
  }
  const meters = {};
  for (const tr of document.querySelectorAll(`li.provider[data-uuid="${chosen}"] > .card tr[data-rc]`)) {
    const meter = tr.querySelector("[role=meter]");
    const fill = meter && meter.querySelector(".fill");
    meters[tr.dataset.rc] = meter && {
      now: meter.getAttribute("aria-valuenow"),
      max: meter.getAttribute("aria-valuemax"),
      // The bar's length is set through the CSSOM (the CSP allows it).
      fill_width: fill ? fill.style.width : null,
      fill_px: fill ? fill.getBoundingClientRect().width : null,
    };
  }
  const summary = document.querySelector("#summary");
  return {
    summary: text(summary),
    matched: summary.dataset.matched,
    trees_matched: summary.dataset.trees,
    trees: document.querySelectorAll("#trees > li.tree").length,
    providers: document.querySelectorAll("li.provider").length,
    headings: [...document.querySelectorAll("main h1, main h2")].map((e) => e.textContent),
    usage_lines: [...document.querySelectorAll("li.provider .card tr[data-rc] td.numbers")]
      .slice(0, 5)
      .map((e) => e.textContent),
    rows,
    meters,
    who: text(document.querySelector("#who-name")),
    version: text(document.querySelector("#version")),
    token_in_session: sessionStorage.getItem("placement-console-token"),
    local_storage: localStorage.length,
  };
};

const READ_PROVIDER = () => {
  const text = (el) => (el ? el.textContent : null);
  const inventory = {};
  for (const tr of document.querySelectorAll("#inventory-table tr[data-rc]")) {
    inventory[tr.dataset.rc] = {
      used: text(tr.querySelector(".used")),
      capacity: text(tr.querySelector(".capacity")),
      free: text(tr.querySelector(".free")),
      numbers: [...tr.querySelectorAll("td.num")].map((e) => e.textContent),
    };
  }
  const consumers = {};
  for (const tr of document.querySelectorAll("#consumers-table tr[data-consumer]")) {
    consumers[tr.dataset.consumer] = {
      project: text(tr.querySelector(".c-project")),
      user: text(tr.querySelector(".c-user")),
      type: text(tr.querySelector(".c-type")),
      here: text(tr.querySelector(".c-here")),
    };
  }
  return {
    hash: location.hash,
    h1: text(document.querySelector("h1")),
    h1_focused: document.activeElement === document.querySelector("h1"),
    uuid: text(document.querySelector("#provider-facts .p-uuid")),
    generation: text(document.querySelector("#provider-facts .p-generation")),
    parent: text(document.querySelector("#provider-facts .p-parent a")),
    headings: [...document.querySelectorAll("main h1, main h2")].map((e) => e.textContent),
    inventory,
    consumers,
  };
};

const READ_WHY = () => {
  const text = (el) => (el ? el.textContent : null);
  const funnels = [...document.querySelectorAll("#explain table.funnel")].map((table) => ({
    id: table.id,
    counts: [...table.querySelectorAll("tbody tr")].map((tr) => [
      Number(tr.dataset.count),
      Number(text(tr.querySelector(".count"))),
    ]),
  }));
  return {
    hash: location.hash,
    h1: text(document.querySelector("h1")),
    query: text(document.querySelector("#why-query")),
    headings: [...document.querySelectorAll("main h1, main h2")].map((e) => e.textContent),
    funnels,
    candidates: text(document.querySelector("#verdict .candidates")),
    near_misses: [...document.querySelectorAll("#near-misses li.fail")].map((e) => e.textContent),
    capacity_total: text(document.querySelector("#capacity-total .total")),
    capacity_rows: [...document.querySelectorAll("#capacity-table tbody tr")].map((tr) => [
      tr.dataset.root,
      tr.dataset.copies,
    ]),
    errors_shown: [...document.querySelectorAll("main .error")].map((e) => e.textContent),
  };
};

async function main() {
  const args = parseArgs(process.argv.slice(2));
  fs.mkdirSync(args.out, { recursive: true });
  const started = Date.now();
  const report = {
    ok: false,
    url: args.url,
    browser: null,
    steps: [],
    cloud: null,
    provider: null,
    why: null,
    csp_probe: null,
    console: [],
    errors: [],
    csp_violations: [],
    failed_requests: [],
    screenshots: [],
    failure: null,
    seconds: null,
  };
  const step = (name) => report.steps.push({ name, at: (Date.now() - started) / 1000 });

  let browser = null;
  let page = null;
  const watch = (p, tag) => {
    p.on("console", (message) => {
      const where = message.location() || {};
      const entry = { tab: tag, type: message.type(), text: message.text() };
      if (where.url) entry.where = `${where.url}:${where.lineNumber}:${where.columnNumber}`;
      report.console.push(entry);
    });
    p.on("pageerror", (error) => {
      const entry = { tab: tag, text: String(error) };
      const stack = error && error.stack ? String(error.stack) : "";
      if (stack && stack !== entry.text) entry.stack = stack; // file:line:column, when told
      report.errors.push(entry);
    });
    p.on("requestfailed", (request) => {
      const failure = request.failure();
      report.failed_requests.push({ tab: tag, url: request.url(), why: failure ? failure.errorText : "failed" });
    });
    p.on("response", (response) => {
      if (response.status() >= 400) {
        report.failed_requests.push({ tab: tag, url: response.url(), why: `HTTP ${response.status()}` });
      }
    });
  };
  const violations = async (p, tag) => {
    const found = await p.evaluate(() => window.__cspViolations || []).catch(() => []);
    return found.map((text) => ({ tab: tag, text }));
  };
  const shoot = async (name) => {
    const file = path.join(args.out, name);
    await page.screenshot({ path: file, fullPage: true });
    report.screenshots.push(file);
  };

  try {
    browser = await puppeteer.launch({
      browser: "firefox",
      executablePath: args.firefox,
      headless: true,
      defaultViewport: VIEWPORT,
      // The profile puppeteer makes is thrown away on close.
      extraPrefsFirefox: {
        "browser.shell.checkDefaultBrowser": false,
        "datareporting.policy.dataSubmissionEnabled": false,
        "toolkit.telemetry.reportingpolicy.firstRun": false,
      },
    });
    report.browser = await browser.version();
    step("launched");
    page = await browser.newPage();
    watch(page, "main");
    await page.evaluateOnNewDocument(watchViolations);

    // ---- sign in, the cloud -------------------------------------------
    await page.goto(args.url, { waitUntil: "load", timeout: WAIT });
    await page.waitForSelector("#sign-in #token", { visible: true, timeout: WAIT });
    report.sign_in = await page.evaluate(() => ({
      label: document.querySelector('label[for="token"]').textContent,
      focused: document.activeElement && document.activeElement.id,
    }));
    await page.type("#token", args.user);
    await page.click('#sign-in button[type="submit"]');
    await page.waitForFunction(
      () => {
        const summary = document.querySelector("#summary[data-matched]");
        return (
          summary &&
          document.querySelectorAll("li.provider").length === Number(summary.dataset.matched) &&
          !document.querySelector("li.provider .loading")
        );
      },
      { timeout: WAIT },
    );
    step("cloud");
    let chosen = args.provider;
    if (!chosen) {
      chosen = await page.evaluate(
        () => document.querySelector("li.provider:has(> .card tr[data-rc])")?.dataset.uuid || null,
      );
      if (!chosen) throw new Error("no provider with an inventory in the cloud view");
    }
    report.cloud = await page.evaluate(READ_CLOUD, chosen);
    await shoot("firefox-cloud.png");

    // ---- one provider, reached by its link ---------------------------
    const link = `li.provider[data-uuid="${chosen}"] > .card a.provider-link`;
    await page.waitForSelector(link, { timeout: WAIT });
    await page.click(link);
    await page.waitForFunction(
      (uuid) =>
        location.hash === `#/provider/${uuid}` &&
        document.querySelector("#provider-facts .p-uuid")?.textContent === uuid &&
        document.querySelector("#inventory-table") &&
        document.querySelector("#consumers-table, #consumers .none") &&
        !/…$/.test(document.querySelector("h1")?.textContent || "…"),
      { timeout: WAIT },
      chosen,
    );
    step("provider");
    report.provider = await page.evaluate(READ_PROVIDER);
    await shoot("firefox-provider.png");

    // ---- why no valid host ---------------------------------------------
    // A change of the URL's fragment only: the router draws the view.
    await page.evaluate((query) => {
      location.hash = `#/why?${query}`;
    }, args.why);
    await page.waitForSelector("#why-results[data-done=true]", { timeout: WAIT });
    step("why");
    report.why = await page.evaluate(READ_WHY);
    await shoot("firefox-why.png");
    report.csp_violations.push(...(await violations(page, "main")));

    // ---- would a CSP violation be seen? (a second tab) ----------------
    const probe = await browser.newPage();
    watch(probe, "probe");
    await probe.evaluateOnNewDocument(watchViolations);
    await probe.goto(args.url, { waitUntil: "load", timeout: WAIT });
    await probe.waitForSelector("#sign-in #token", { timeout: WAIT });
    await probe.evaluate(() => document.body.setAttribute("style", "color: red"));
    await probe
      .waitForFunction(() => window.__cspViolations.length > 0, { timeout: 5000 })
      .catch(() => {});
    const seen = await violations(probe, "probe");
    const colour = await probe.evaluate(() => getComputedStyle(document.body).color);
    // Firefox logs the violation as a JavaScript error: it reaches us as a
    // page error (Chromium's is a console message); wait for it a little.
    const logged = () =>
      [...report.console, ...report.errors].filter((m) => m.tab === "probe" && CSP.test(m.text));
    for (let i = 0; i < 25 && !logged().length; i++) await new Promise((r) => setTimeout(r, 100));
    report.csp_probe = {
      event: seen.map((v) => v.text),
      logged: logged().map((m) => m.text),
      style_applied: colour === "rgb(255, 0, 0)",
    };
    await probe.close();
    step("probe");

    // The main tab's CSP violations, however they were told.
    const mainTab = (m) => m.tab === "main";
    for (const m of [...report.console, ...report.errors].filter(mainTab)) {
      if (CSP.test(m.text)) report.csp_violations.push({ tab: m.tab, text: m.text });
    }
    const problems = [];
    const errors = report.errors.filter((e) => mainTab(e) && !CSP.test(e.text));
    if (errors.length) problems.push(`${errors.length} uncaught error(s)`);
    if (report.csp_violations.length) problems.push(`${report.csp_violations.length} CSP violation(s)`);
    const failed = report.failed_requests.filter(mainTab);
    if (failed.length) problems.push(`${failed.length} failed request(s)`);
    const probed = report.csp_probe;
    if (!probed.event.length || !probed.logged.length || probed.style_applied) {
      problems.push("the CSP probe's style attribute was not refused, or not reported both ways");
    }
    // The probe's own errors are the violation it caused, nothing else.
    if (report.errors.some((e) => e.tab === "probe" && !CSP.test(e.text))) {
      problems.push("the probe tab raised an error other than its CSP violation");
    }
    if (problems.length) throw new Error(problems.join("; "));
    report.ok = true;
  } catch (error) {
    report.failure = String(error && error.stack ? error.stack : error);
    if (page) {
      await page
        .screenshot({ path: path.join(args.out, "firefox-failure.png"), fullPage: true })
        .then(() => report.screenshots.push(path.join(args.out, "firefox-failure.png")))
        .catch(() => {});
      report.failure_page = await page
        .evaluate(() => ({ hash: location.hash, main: document.querySelector("main")?.innerText?.slice(0, 2000) }))
        .catch(() => null);
    }
  } finally {
    if (browser) await browser.close().catch(() => {});
    report.seconds = (Date.now() - started) / 1000;
    process.stdout.write(JSON.stringify(report, null, 2) + "\n");
  }
  process.exitCode = report.ok ? 0 : 1;
}

main();
