// "Why no valid host?" (#/why?QUERY): a form that builds a query of GET
// /allocation_candidates, kept in the page's URL (shareable, reloadable),
// and the answers of /allocation_candidates/explain and /capacity (1.44)
// drawn as charts: the funnel of each request group and of the trees, the
// near misses with what each lacks, and the copies that fit per tree.

import { formatVersion, NEEDS } from "./api.js";
import { announce, bar, clear, count, errorBox, h, notice, providerLink } from "./ui.js";

const FIXED_CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB"];

// Step names of the explanation, in words.
const WORDS = {
  in_tree: "in tree",
  member_of: "member of",
  forbidden_aggregates: "not member of",
  required_traits: "required traits",
  forbidden_traits: "forbidden traits",
  any_traits: "any of the traits",
  resources: "room for",
  root_required: "root has traits",
  root_member_of: "root member of",
  shared_room: "room shared by groups",
  one_provider_per_tree: "one provider per tree (before 1.29)",
  tree_traits: "required traits over the tree",
  isolate: "isolated groups",
  "group_policy=isolate": "group_policy=isolate",
  same_subtree: "same subtree",
  same_subtree_apart: "negated groups outside the subtree",
};

/** Encode a query value, keeping the characters Placement's syntax uses
 * readable (":" "," "!"). */
function encode(text) {
  return encodeURIComponent(text).replace(/%3A/gi, ":").replace(/%2C/gi, ",");
}

function decode(text) {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}

/** "a=1&b=2" -> [["a","1"],["b","2"]] (order and repeats kept). */
export function pairs(query) {
  return query
    .split("&")
    .filter((part) => part !== "")
    .map((part) => {
      const at = part.indexOf("=");
      return at < 0 ? [decode(part), ""] : [decode(part.slice(0, at)), decode(part.slice(at + 1))];
    });
}

export function unpairs(list) {
  return list.map(([key, value]) => `${encode(key)}=${encode(value)}`).join("&");
}

const splitList = (text) =>
  text
    .split(/[\s,]+/)
    .map((item) => item.trim())
    .filter(Boolean);

/** The form's fields from a query (what the fields cannot say goes to the
 * extra lines, as written). */
function fieldsFrom(query) {
  const fields = { VCPU: "", MEMORY_MB: "", DISK_GB: "", nearMisses: "", limit: "" };
  Object.assign(fields, { extra: [], required: [], forbidden: [], memberOf: [], lines: [] });
  let seenResources = false;
  for (const [key, value] of pairs(query)) {
    if (key === "resources" && !seenResources) {
      seenResources = true;
      for (const item of value.split(",").filter(Boolean)) {
        const [name, amount] = item.split(":");
        if (FIXED_CLASSES.includes(name) && fields[name] === "" && /^\d+$/.test(amount || "")) fields[name] = amount;
        else fields.extra.push(item);
      }
    } else if (key === "required" && !value.startsWith("in:")) {
      for (const item of value.split(",").filter(Boolean)) {
        if (item.startsWith("!")) fields.forbidden.push(item.slice(1));
        else fields.required.push(item);
      }
    } else if (key === "member_of") {
      fields.memberOf.push(value);
    } else if (key === "near_misses" && fields.nearMisses === "") {
      fields.nearMisses = value;
    } else if (key === "limit" && fields.limit === "") {
      fields.limit = value;
    } else {
      fields.lines.push(`${key}=${value}`);
    }
  }
  return fields;
}

/** A query from the form's fields. */
function queryFrom(form) {
  const value = (name) => form.elements[name].value.trim();
  const list = [];
  const resources = [];
  for (const name of FIXED_CLASSES) {
    const amount = value(`w-${name}`);
    if (amount !== "" && Number(amount) > 0) resources.push(`${name}:${amount}`);
  }
  for (const item of splitList(value("w-extra"))) resources.push(item.toUpperCase());
  if (resources.length) list.push(["resources", resources.join(",")]);
  const traits = [
    ...splitList(value("w-required")).map((t) => t.toUpperCase()),
    ...splitList(value("w-forbidden")).map((t) => `!${t.toUpperCase().replace(/^!/, "")}`),
  ];
  if (traits.length) list.push(["required", traits.join(",")]);
  for (const item of value("w-member-of").split(/\s+/).filter(Boolean)) list.push(["member_of", item]);
  for (const line of form.elements["w-lines"].value.split("\n")) {
    const text = line.trim();
    if (!text || text.startsWith("#")) continue;
    const at = text.indexOf("=");
    list.push(at < 0 ? [text, ""] : [text.slice(0, at).trim(), text.slice(at + 1).trim()]);
  }
  if (value("w-near-misses") !== "") list.push(["near_misses", value("w-near-misses")]);
  if (value("w-limit") !== "") list.push(["limit", value("w-limit")]);
  return unpairs(list);
}

export function mountWhy(main, ctx, query) {
  const { api } = ctx;
  const state = { alive: true };
  const heading = h("h1", {}, "Why no valid host?");
  const form = buildForm(fieldsFrom(query));
  const raw = h(
    "form",
    { id: "raw-form", class: "raw", "aria-labelledby": "raw-title" },
    h("h2", { id: "raw-title" }, "Or a raw query string"),
    h("label", { for: "w-raw" }, "Query of GET /allocation_candidates"),
    h("input", {
      id: "w-raw",
      name: "w-raw",
      type: "text",
      value: query,
      spellcheck: "false",
      autocomplete: "off",
      class: "wide",
    }),
    h("button", { type: "submit" }, "Explain this query"),
  );
  const results = h("div", { id: "why-results", "aria-live": "polite" });
  main.append(
    heading,
    h(
      "p",
      { class: "lead" },
      "Ask what a flavor asks of Placement and see which step leaves no host, which hosts came " +
        "close and what each lacks, and how many copies fit.",
    ),
    h("div", { class: "why-forms" }, form, raw),
    results,
  );
  announce(heading, "Why no valid host?");

  const go = (text) => {
    // The query goes into the page's URL: the router reads it back and
    // this view runs again, so a reload or a shared link shows the same.
    const target = `#/why${text ? "?" + text : ""}`;
    if (location.hash === target) run(text);
    else location.hash = target;
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go(queryFrom(form));
  });
  raw.addEventListener("submit", (event) => {
    event.preventDefault();
    go(raw.elements["w-raw"].value.trim().replace(/^\?/, ""));
  });

  const section = (id, title, waiting) =>
    h(
      "section",
      { id, class: "block", "aria-labelledby": `${id}-title` },
      h("h2", { id: `${id}-title` }, title),
      h("p", { class: "loading" }, waiting),
    );

  async function run(text) {
    clear(results);
    if (!text) {
      results.append(h("p", { class: "none" }, "Fill in the form and press Explain: the answer shows here."));
      return;
    }
    results.append(h("p", { class: "query" }, "Query: ", h("code", { id: "why-query" }, text)));
    if (!api.has("explain")) {
      await candidatesOnly(text);
      return;
    }
    const explainBox = section("explain", "Explanation", "Asking /allocation_candidates/explain…");
    const capacityBox = section("capacity", "Capacity: copies that fit", "Asking /allocation_candidates/capacity…");
    results.append(explainBox, capacityBox);
    // near_misses is explain's own: capacity refuses it.
    const capacityQuery = unpairs(pairs(text).filter(([key]) => key !== "near_misses"));
    const explain = api
      .get(`/allocation_candidates/explain?${text}`, { action: "explain allocation candidates" })
      .then((answer) => state.alive && renderExplain(explainBox, answer.body))
      .catch((error) => state.alive && showError(explainBox, error));
    const copies = api
      .get(`/allocation_candidates/capacity?${capacityQuery}`, { action: "count the copies that fit" })
      .then((answer) => state.alive && renderCapacity(capacityBox, answer.body))
      .catch((error) => state.alive && showError(capacityBox, error));
    await Promise.all([explain, copies]);
    if (state.alive) results.dataset.done = "true";
  }

  /** Below 1.44: say what is missing, and count the candidates. */
  async function candidatesOnly(text) {
    results.append(
      notice(
        `Explaining a query needs microversion ${formatVersion(NEEDS.explain)} (GET ` +
          `/allocation_candidates/explain and /capacity); this service serves up to ` +
          `${formatVersion(api.serviceMax)}. Only the number of candidates can be shown.`,
      ),
    );
    const waiting = h("p", { class: "loading" }, "Asking GET /allocation_candidates…");
    const target = h("div", { id: "candidates-only" }, waiting);
    results.append(target);
    try {
      // near_misses is explain's own: GET /allocation_candidates refuses it.
      const plain = unpairs(pairs(text).filter(([key]) => key !== "near_misses"));
      const answer = await api.get(`/allocation_candidates?${plain}`, { action: "list allocation candidates" });
      if (!state.alive) return;
      const found = answer.body.allocation_requests.length;
      const summaries = answer.body.provider_summaries || {};
      const roots = new Set(Object.values(summaries).map((s) => s.root_provider_uuid).filter(Boolean));
      const where = roots.size ? `, in ${count(roots.size, "tree")}` : "";
      clear(target).append(h("p", { class: "big" }, `${count(found, "allocation candidate")}${where}.`));
    } catch (error) {
      if (state.alive) clear(target).append(errorBox(error, { signOut: ctx.signOut }));
    }
    if (state.alive) results.dataset.done = "true";
  }

  function showError(box, error) {
    const title = box.firstElementChild;
    clear(box).append(title, errorBox(error, { signOut: ctx.signOut }));
  }

  run(query);
  return {
    unmount() {
      state.alive = false;
    },
  };
}

function buildForm(fields) {
  const input = (id, more) =>
    h("input", { id, name: id, spellcheck: "false", autocomplete: "off", ...more });
  const number = (id, text, value, more = {}) =>
    h(
      "div",
      { class: "field" },
      h("label", { for: id }, text),
      input(id, { type: "number", min: "0", step: "1", value, ...more }),
    );
  const text = (id, label, value, hint) =>
    h(
      "div",
      { class: "field wide-field" },
      h("label", { for: id }, label),
      input(id, { type: "text", value, "aria-describedby": `${id}-hint` }),
      h("small", { class: "hint", id: `${id}-hint` }, hint),
    );
  return h(
    "form",
    { id: "why-form", class: "why", "aria-labelledby": "why-form-title" },
    h("h2", { id: "why-form-title" }, "The request"),
    h(
      "fieldset",
      {},
      h("legend", {}, "Resources (the unsuffixed group)"),
      h("div", { class: "row" }, FIXED_CLASSES.map((name) => number(`w-${name}`, name, fields[name]))),
      text("w-extra", "Other resources", fields.extra.join(","), "CLASS:N, comma separated, e.g. VGPU:1,CUSTOM_FPGA:2"),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Traits and aggregates"),
      text("w-required", "Required traits", fields.required.join(","), "comma separated, e.g. HW_CPU_X86_AVX2"),
      text("w-forbidden", "Forbidden traits", fields.forbidden.join(","), "comma separated, without the !"),
      text(
        "w-member-of",
        "member_of",
        fields.memberOf.join(" "),
        "an aggregate uuid, or in:UUID1,UUID2; several separated by spaces (each must hold)",
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Granular groups and other parameters"),
      h("label", { for: "w-lines", class: "block-label" }, "Extra query lines, one name=value a line"),
      h(
        "textarea",
        { id: "w-lines", name: "w-lines", rows: "4", spellcheck: "false", "aria-describedby": "w-lines-hint" },
        fields.lines.join("\n"),
      ),
      h(
        "small",
        { class: "hint", id: "w-lines-hint" },
        "e.g. resources_GPU=VGPU:1, required_GPU=CUSTOM_X, group_policy=none, " +
          "same_subtree=_GPU,_NUMA, root_required=!COMPUTE_STATUS_DISABLED",
      ),
      h(
        "div",
        { class: "row" },
        number("w-near-misses", "Near misses to show", fields.nearMisses, { max: "50", placeholder: "5" }),
        number("w-limit", "Trees to count (limit)", fields.limit, { min: "1", placeholder: "all" }),
      ),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Explain")),
  );
}

function stepLabel(step, kind) {
  const name = step[kind];
  const words = WORDS[name] || name.replace(/_/g, " ");
  const value = (step.value || []).join(", ");
  return value ? `${words} ${value}` : words;
}

function headRow(...names) {
  return h("thead", {}, h("tr", {}, names.map((name) => h("th", { scope: "col" }, name))));
}

/** One funnel as a table of bars: each row a step, the bar the share of
 * ``whole`` left after it, the number as text. */
function funnel(id, caption, whole, unit, rows) {
  return h(
    "table",
    { class: "funnel", id },
    h("caption", {}, caption),
    headRow("Step", `${unit} left after it`, "Count"),
    h(
      "tbody",
      {},
      rows.map((row) => {
        const label = `${row.label}: ${row.count} of ${whole} ${unit.toLowerCase()}`;
        return h(
          "tr",
          { class: ["step", row.kind], dataset: { count: String(row.count) } },
          h("th", { scope: "row" }, row.label),
          h("td", { class: "bar-cell" }, bar(row.count, whole, { label, kind: ["neutral", !row.count && "zero"] })),
          h(
            "td",
            { class: "numbers" },
            h("span", { class: "count" }, String(row.count)),
            h("span", { class: "of" }, ` of ${whole}`),
            row.note ? h("span", { class: "note" }, ` · ${row.note}`) : null,
            row.count === 0 ? h("strong", { class: "none-left" }, " · none left") : null,
          ),
        );
      }),
    ),
  );
}

function renderExplain(box, body) {
  const title = box.firstElementChild;
  clear(box).append(title);
  const cloud = body.cloud;
  const capped = body.candidates_capped;
  const found = capped
    ? `at least ${body.candidates} (counting stopped at ${capped.at}, ${capped.by})`
    : String(body.candidates);
  box.append(
    h(
      "p",
      { class: ["verdict", body.candidates ? "found" : "nothing"], id: "verdict" },
      body.candidates ? "✓ " : "✗ ",
      h("strong", { class: "candidates" }, found),
      ` ${body.candidates === 1 ? "candidate" : "candidates"}, in ${count(body.trees_with_candidates, "tree")} ` +
        `(the cloud: ${count(cloud.providers, "provider")} in ${count(cloud.trees, "tree")}).`,
    ),
  );
  for (const [suffix, group] of Object.entries(body.groups)) {
    const asked = Object.entries(group.resources)
      .map(([rc, n]) => `${rc}:${n}`)
      .join(", ");
    const rows = [{ label: "providers considered", count: group.considered, kind: "start" }];
    for (const step of group.funnel) {
      const lacking = Object.entries(step.lacking || {})
        .filter(([, n]) => n)
        .map(([why, n]) => `${n} lacking ${why.replace(/_/g, " ")}`)
        .join(", ");
      rows.push({ label: stepLabel(step, "filter"), count: step.after, note: lacking, kind: step.filter });
    }
    rows.push({
      label: suffix ? "can serve the group" : "can serve a class of the group",
      count: group.providers,
      note: `in ${count(group.trees, "tree")}`,
      kind: "end",
    });
    const name = suffix ? `“${suffix}”` : "unsuffixed";
    const caption = `Group ${name} (${asked || "no resources"}): providers left after each step`;
    box.append(funnel(`funnel-group-${suffix || "unsuffixed"}`, caption, group.considered, "Providers", rows));
  }
  const trees = [{ label: "every group can be served", count: body.trees_for_all_groups, kind: "start" }];
  for (const [steps, kind] of [
    [body.request_filters, "filter"],
    [body.merge_rules, "rule"],
  ]) {
    for (const step of steps) {
      trees.push({ label: stepLabel(step, kind), count: step.after, note: `had ${step.before}`, kind });
    }
  }
  trees.push({ label: "with candidates", count: body.trees_with_candidates, kind: "end" });
  const caption = "Trees left after each request-wide filter and merge rule";
  box.append(funnel("funnel-trees", caption, cloud.trees, "Trees", trees));

  const misses = body.near_misses || [];
  box.append(h("h3", { id: "near-title" }, "Near misses (fewest shortfalls first)"));
  if (!misses.length) {
    const words = body.candidates ? "None asked for, or every tree has candidates." : "No near miss.";
    box.append(h("p", { class: "none", id: "near-misses-none" }, words));
    return;
  }
  box.append(
    h(
      "ol",
      { class: "near-misses", id: "near-misses", "aria-labelledby": "near-title" },
      misses.map((miss) =>
        h(
          "li",
          { dataset: { root: miss.root.uuid } },
          h(
            "p",
            { class: "miss-head" },
            providerLink(miss.root.uuid, miss.root.name),
            ` — ${miss.fails.length} to fix`,
          ),
          h(
            "ul",
            { class: "fails" },
            miss.fails.map((fail) => h("li", { class: "fail", dataset: { rule: fail.rule } }, fail.text)),
          ),
        ),
      ),
    ),
  );
}

function renderCapacity(box, body) {
  const title = box.firstElementChild;
  clear(box).append(title);
  const bound = body.total_exact ? "" : " (at least: a lower bound)";
  box.append(
    h(
      "p",
      { class: "verdict", id: "capacity-total" },
      h("strong", { class: "total" }, String(body.total)),
      ` ${body.total === 1 ? "copy fits" : "copies fit"}${bound}, in ${count(body.trees_with_room, "tree")}.`,
    ),
  );
  if (!body.trees.length) {
    box.append(h("p", { class: "none" }, "Not one copy fits anywhere."));
    return;
  }
  const most = Math.max(...body.trees.map((tree) => tree.copies), 1);
  box.append(
    h(
      "table",
      { class: "funnel capacity", id: "capacity-table" },
      h("caption", {}, "Copies per tree, the most first (≥: a lower bound, the tree has several providers in reach)"),
      headRow("Tree", "Copies", "Count"),
      h(
        "tbody",
        {},
        body.trees.map((tree) => {
          const atLeast = tree.exact ? "" : "at least ";
          const label = `${tree.root.name}: ${atLeast}${tree.copies} copies`;
          return h(
            "tr",
            { dataset: { root: tree.root.uuid, copies: String(tree.copies) } },
            h("th", { scope: "row" }, providerLink(tree.root.uuid, tree.root.name)),
            h("td", { class: "bar-cell" }, bar(tree.copies, most, { label, kind: "neutral" })),
            h(
              "td",
              { class: "numbers" },
              h("span", { class: "copies" }, `${tree.exact ? "" : "≥ "}${tree.copies}`),
              tree.exact ? "" : h("span", { class: "note" }, " (at least)"),
            ),
          );
        }),
      ),
    ),
  );
}
