// Small DOM helpers shared by the views. Everything is built with
// createElement and textContent: no HTML strings, no inline style
// attributes (the page's Content-Security-Policy forbids them); a bar's
// length is set through the CSSOM, which the policy allows.

/** h("a", {href: "#/", class: "x", dataset: {uuid}}, "text", child, ...) */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  // A loop over the keys (no entries array): the cloud view calls this
  // thousands of times per page of trees.
  for (const name in attributes) {
    const value = attributes[name];
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
    else if (name === "dataset") setData(element, value);
    else if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (name === "value" || name === "checked" || name === "selected") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function setData(element, values) {
  for (const key in values) {
    // data-* directly when the name needs no camelCase conversion.
    if (/^[a-z0-9]+$/.test(key)) element.setAttribute(`data-${key}`, String(values[key]));
    else element.dataset[key] = values[key];
  }
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else if (child instanceof Node) element.appendChild(child);
    else element.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(element) {
  while (element.firstChild) element.firstChild.remove();
  return element;
}

/** Inventory capacity as Placement computes it. */
export function capacity(inventory) {
  return Math.floor((inventory.total - inventory.reserved) * inventory.allocation_ratio);
}

/** 2 -> "2.0", 1.5 -> "1.5", as Python prints a float. */
export function ratio(value) {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

export function shortUuid(uuid) {
  return uuid ? uuid.slice(0, 8) + "…" : "";
}

export function time(date = new Date()) {
  return date.toTimeString().slice(0, 8);
}

/**
 * A horizontal bar: role="meter" with its numbers for assistive
 * technology, and the visible fill sized through the CSSOM. ``label`` is
 * the accessible name; ``text`` the words a sighted reader sees next to it
 * (given by the caller, so the numbers are never only a length or a
 * colour).
 */
export function bar(value, max, { label, kind = "" } = {}) {
  const over = max > 0 ? value > max : value > 0;
  const share = max > 0 ? Math.min(value / max, 1) : value > 0 ? 1 : 0;
  const level = over ? "over" : share >= 0.9 ? "high" : share >= 0.6 ? "mid" : "low";
  // Cloned from a bar built once: a page of trees has hundreds of them.
  meterTemplate ??= h("span", { role: "meter", "aria-valuemin": 0 }, h("span", { class: "fill" }));
  const meter = meterTemplate.cloneNode(true);
  meter.className = ["bar", ...[kind].flat(), `level-${level}`].filter(Boolean).join(" ");
  meter.setAttribute("aria-valuemax", String(Math.max(max, 0)));
  meter.setAttribute("aria-valuenow", String(Math.min(value, Math.max(max, 0))));
  meter.setAttribute("aria-valuetext", over ? `${value} of ${max}, over` : `${value} of ${max}`);
  if (label !== null && label !== undefined) meter.setAttribute("aria-label", String(label));
  meter.firstChild.style.width = `${(share * 100).toFixed(2)}%`;
  return meter;
}

let meterTemplate = null;

/** A resource class's usage in words: "6 / 32" and "(total 16, reserved
 * 0, ratio 2.0)", and whether it is over capacity. */
export function usageText(used, inventory) {
  const cap = capacity(inventory);
  return {
    head: `${used} / ${cap}`,
    tail: `(total ${inventory.total}, reserved ${inventory.reserved}, ratio ${ratio(inventory.allocation_ratio)})`,
    over: used > cap,
    cap,
  };
}

/** "1 tree", "2 trees". */
export function count(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}

/** An explained API error: its title, status, detail, code, and a sentence.
 * Anything else thrown (a bug, a body that is not JSON) is shown as is. */
export function errorBox(error, { signOut = null } = {}) {
  if (!error || error.sentence === undefined) {
    error = { title: "Error", sentence: String(error), detailLines: [] };
  }
  const lines = error.detailLines || [String(error.message || error)];
  const box = h(
    "section",
    { class: "error", role: "alert", "aria-labelledby": "error-title" },
    h(
      "h2",
      { id: "error-title" },
      error.status ? `${error.title} (HTTP ${error.status})` : error.title || "Error",
    ),
    h("p", { class: "sentence" }, error.sentence || String(error)),
  );
  if (lines.length) {
    box.append(
      h(
        "div",
        { class: "detail" },
        h("span", { class: "label" }, "The service says: "),
        h("q", { class: "first" }, lines[0]),
        lines.slice(1).map((line) => h("p", { class: "more" }, line)),
      ),
    );
  }
  const facts = h("dl", { class: "facts" });
  if (error.code) facts.append(h("dt", {}, "Code"), h("dd", {}, h("code", {}, error.code)));
  if (error.rule) facts.append(h("dt", {}, "Policy rule"), h("dd", {}, h("code", {}, error.rule)));
  if (error.path) facts.append(h("dt", {}, "Request"), h("dd", {}, h("code", {}, `GET ${error.path}`)));
  if (facts.childElementCount) box.append(facts);
  if (signOut && (error.status === 401 || error.status === 403)) {
    box.append(h("p", {}, h("button", { type: "button", onclick: signOut }, "Sign out and use another token")));
  }
  return box;
}

/** A notice that a feature is missing from the service's microversion. */
export function notice(text) {
  return h("p", { class: "notice", role: "note" }, text);
}

/** Chips for names (traits, classes). ``onpick``: they are buttons that
 * call it with their name; or ``pick``: they are buttons marked with
 * data-pick=PICK and data-value=NAME, for a listener on a container (see
 * ``onPick``), so that copies made with cloneNode work too. */
export function chipList(items, { label, empty = "none", onpick = null, pick = null, title = null } = {}) {
  if (!items.length) return h("span", { class: "none" }, empty);
  return h(
    "ul",
    { class: "chips", "aria-label": label },
    items.map((item) =>
      h(
        "li",
        {},
        onpick || pick
          ? h(
              "button",
              {
                type: "button",
                class: "chip",
                title: title ? title(item) : null,
                onclick: onpick ? () => onpick(item) : null,
                dataset: pick ? { pick, value: item } : null,
              },
              item,
            )
          : h("span", { class: "chip" }, item),
      ),
    ),
  );
}

/** An aggregate uuid, shortened, with the full uuid in an <abbr title>.
 * ``onpick`` or ``pick``: a button, as in ``chipList``. */
export function aggregate(uuid, { onpick = null, pick = null } = {}) {
  const abbr = h("abbr", { title: uuid }, shortUuid(uuid));
  if (!onpick && !pick) return h("span", { class: "chip agg" }, abbr);
  return h(
    "button",
    {
      type: "button",
      class: "chip agg",
      "aria-label": `aggregate ${uuid}: show its members`,
      onclick: onpick ? () => onpick(uuid) : null,
      dataset: pick ? { pick, value: uuid } : null,
    },
    abbr,
  );
}

/** Call ``handler(pick, value)`` when a button made with ``pick`` inside
 * ``container`` is pressed (a click, or Enter or Space on it). */
export function onPick(container, handler) {
  container.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-pick]") : null;
    if (button && container.contains(button)) handler(button.dataset.pick, button.dataset.value);
  });
}

export function providerLink(uuid, name) {
  return h("a", { href: `#/provider/${uuid}`, class: "provider-link", dataset: { link: uuid } }, name || uuid);
}

export function consumerLink(uuid, text = null) {
  return h("a", { href: `#/consumer/${uuid}`, class: "consumer-link" }, h("code", {}, text || uuid));
}

export function resourcesText(resources) {
  return Object.entries(resources)
    .map(([name, amount]) => `${name} ${amount}`)
    .join(", ");
}

/** Set the document title and move focus to the view's heading, so a
 * keyboard or screen reader user lands on the new page. */
export function announce(heading, title) {
  document.title = `${title} · Placement console`;
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
  }
}
