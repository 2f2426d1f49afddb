// placement-svc's operator console: the page's entry point.
//
// Plain JavaScript ES modules, written for this project: no framework, no
// build step, no third-party library. Standard DOM and fetch only, so it
// runs as served in any current browser (Chromium, Firefox). The page's
// Content-Security-Policy forbids inline script and style: everything is
// built with the DOM API, and styles live in console.css.
//
// Views (hash routes):
//   #/                  the cloud: trees, usage, filters, refresh (cloud.js)
//   #/provider/UUID     one provider and its consumers (provider.js)
//   #/consumer/UUID     one consumer's allocations (provider.js)
//   #/why?QUERY         why no valid host: explain and capacity (why.js)

import { Api, atLeast, CONSOLE_MIN, formatVersion } from "./api.js";
import { mountCloud } from "./cloud.js";
import { mountConsumer, mountProvider } from "./provider.js";
import { announce, clear, errorBox, h } from "./ui.js";
import { mountWhy } from "./why.js";

const api = new Api();
const ctx = { api, cloud: null, signOut };
const main = document.getElementById("main");
const who = document.getElementById("who");
const versionText = document.getElementById("version");
let current = null; // the mounted view: {unmount()}

function signOut() {
  api.signOut();
  ctx.cloud = null;
  route();
}

/** "#/provider/X?a=b" -> {path: "/provider/X", query: "a=b"} */
function parseHash() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const at = hash.indexOf("?");
  return { path: at < 0 ? hash : hash.slice(0, at), query: at < 0 ? "" : hash.slice(at + 1) };
}

function markNav(path) {
  for (const link of document.querySelectorAll("#nav a[data-view]")) {
    const view = link.dataset.view;
    const here = view === "why" ? path.startsWith("/why") : !path.startsWith("/why");
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function renderWho() {
  clear(who);
  if (api.token === null) {
    who.append(h("span", { class: "muted" }, "Not signed in"));
    return;
  }
  const name = api.auth === "noauth2" ? api.token : "token ••••" + api.token.slice(-4);
  who.append(
    h("span", { class: "signed-in" }, "Signed in as ", h("strong", { id: "who-name" }, name)),
    " ",
    h("button", { type: "button", id: "sign-out", class: "secondary", onclick: signOut }, "Sign out"),
  );
}

function signInForm() {
  const noauth = api.auth !== "keystone";
  const label = noauth ? "User (noauth2: admin, or user:project)" : "Keystone token";
  const heading = h("h1", {}, "Sign in");
  const input = h("input", {
    id: "token",
    name: "token",
    type: noauth ? "text" : "password",
    autocomplete: noauth ? "username" : "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-hint",
  });
  const form = h(
    "form",
    { id: "sign-in", class: "sign-in", "aria-label": "Sign in" },
    h("label", { for: "token" }, label),
    input,
    h(
      "p",
      { id: "token-hint", class: "hint" },
      noauth
        ? "This service runs with auth_strategy = noauth2: the name you give is the token sent, " +
            "and the API's policy decides what it may read."
        : "This service runs with auth_strategy = keystone: paste a token (openstack token issue). ",
      " It is kept in this tab only (sessionStorage) and sent as X-Auth-Token with every request.",
    ),
    h("button", { type: "submit" }, "Sign in"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) return;
    api.signIn(value);
    route();
  });
  main.append(heading, form);
  announce(null, "Sign in");
  input.focus();
}

async function route() {
  if (current) current.unmount();
  current = null;
  clear(main);
  renderWho();
  const { path, query } = parseHash();
  markNav(path);
  if (api.version === null) {
    try {
      await api.negotiate();
    } catch (error) {
      main.append(h("h1", {}, "The service cannot be read"), errorBox(error));
      return;
    }
    const same = formatVersion(api.version) === formatVersion(api.serviceMax);
    const [asked, min, max] = [api.version, api.serviceMin, api.serviceMax].map(formatVersion);
    versionText.textContent = same ? `API ${asked}` : `API ${asked} (service max ${max})`;
    versionText.title = `The console asks for microversion ${asked}; the service serves ${min} to ${max}.`;
  }
  if (!atLeast(api.version, CONSOLE_MIN)) {
    main.append(
      h("h1", {}, "This service is too old for the console"),
      h(
        "p",
        {},
        `The console needs microversion ${formatVersion(CONSOLE_MIN)} (provider trees); ` +
          `this service serves up to ${formatVersion(api.serviceMax)}.`,
      ),
    );
    return;
  }
  if (api.token === null) {
    signInForm();
    return;
  }
  const params = new URLSearchParams(query);
  const provider = /^\/provider\/([^/]+)$/.exec(path);
  const consumer = /^\/consumer\/([^/]+)$/.exec(path);
  if (provider) current = mountProvider(main, ctx, decodeURIComponent(provider[1]));
  else if (consumer) current = mountConsumer(main, ctx, decodeURIComponent(consumer[1]));
  else if (path === "/why") current = mountWhy(main, ctx, query);
  else if (path === "/" || path === "") current = mountCloud(main, ctx, params);
  else {
    const heading = h("h1", {}, "No such page");
    main.append(heading, h("p", {}, "Go to ", h("a", { href: "#/" }, "the cloud"), "."));
    announce(heading, "No such page");
  }
}

document.getElementById("consumer-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = event.target.elements.consumer.value.trim();
  if (value) location.hash = `#/consumer/${value}`;
});
window.addEventListener("hashchange", route);
route();
