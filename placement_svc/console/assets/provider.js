// A provider (#/provider/UUID): its facts, inventories with bars, family,
// traits, aggregates and consumers; and a consumer (#/consumer/UUID): its
// allocations across providers.

import { formatVersion, NEEDS, pool } from "./api.js";
import { INCLUDE, SHARING_TRAIT } from "./model.js";
import {
  announce,
  bar,
  capacity,
  chipList,
  clear,
  consumerLink,
  count,
  errorBox,
  h,
  notice,
  providerLink,
  ratio,
  resourcesText,
  shortUuid,
  time,
} from "./ui.js";

const UUID = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
const MAX_CONSUMERS_ONE_BY_ONE = 200;

/** The names of providers by uuid: from the cloud already read, else one
 * request per unknown provider. Unknown ones stay their uuid. */
async function providerNames(ctx, uuids, known = new Map()) {
  const names = new Map(known);
  const missing = [];
  for (const uuid of new Set(uuids)) {
    if (names.has(uuid)) continue;
    const cached = ctx.cloud && ctx.cloud.providers.get(uuid);
    if (cached) names.set(uuid, cached.name);
    else missing.push(uuid);
  }
  await pool(missing, 8, async (uuid) => {
    try {
      const answer = await ctx.api.get(`/resource_providers?uuid=${uuid}`, { action: "read a provider's name" });
      const found = answer.body.resource_providers[0];
      if (found) names.set(uuid, found.name);
    } catch {
      // a name is a nicety: the uuid stands in for it
    }
  });
  return names;
}

function providerRef(names, uuid) {
  return providerLink(uuid, names.get(uuid) || uuid);
}

function refList(names, uuids) {
  return h("ul", { class: "inline-list" }, uuids.map((uuid) => h("li", {}, providerRef(names, uuid))));
}

function section(title, id, ...content) {
  return h("section", { "aria-labelledby": id, class: "block" }, h("h2", { id }, title), ...content);
}

function reloadButton(onclick) {
  return h("button", { type: "button", class: "secondary reload", onclick }, "Reload");
}

function badUuid(main, what, uuid) {
  const heading = h("h1", {}, `No such ${what}`);
  main.append(heading, h("p", { class: "error-text" }, `“${uuid}” is not a uuid.`));
  announce(heading, `No such ${what}`);
}

export function mountProvider(main, ctx, uuid) {
  const state = { alive: true };
  if (!UUID.test(uuid)) {
    badUuid(main, "provider", uuid);
    return { unmount() {} };
  }
  const heading = h("h1", {}, "Provider ", h("span", { class: "name" }, "…"));
  const status = h("p", { class: "freshness" }, "Reading the provider…");
  const body = h("div", { id: "provider-body" });
  main.append(h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← The cloud")), heading, status, body);
  announce(heading, "Provider");

  async function load() {
    const { api } = ctx;
    try {
      const tree = await api.get(
        `/resource_providers?in_tree=${uuid}${api.has("include") ? `&include=${INCLUDE}` : ""}`,
        { action: "read the provider's tree" },
      );
      const list = tree.body.resource_providers;
      const me = list.find((p) => p.uuid === uuid);
      if (!me) {
        clear(heading).append("No provider ", h("code", {}, uuid));
        status.textContent = "The service has no resource provider with this uuid.";
        announce(heading, "No such provider");
        return;
      }
      if (!api.has("include")) {
        Object.assign(me, await api.details(uuid, "the provider's"));
      }
      const names = new Map(list.map((p) => [p.uuid, p.name]));
      const children = list.filter((p) => p.parent_provider_uuid === uuid).sort((a, b) => (a.name < b.name ? -1 : 1));
      const traits = me.traits.traits;
      const aggs = me.aggregates.aggregates;
      // Sharing, both ways: one request each, only when it can matter.
      let sharesWith = [];
      let sharedBy = [];
      if (aggs.length) {
        const members = await api.get(`/resource_providers?member_of=in:${aggs.join(",")}`, {
          action: "list the members of the provider's aggregates",
        });
        const others = members.body.resource_providers.filter((p) => p.root_provider_uuid !== me.root_provider_uuid);
        others.forEach((p) => names.set(p.uuid, p.name));
        if (traits.includes(SHARING_TRAIT)) {
          const roots = new Set(others.map((p) => p.root_provider_uuid));
          sharesWith = [...roots];
        }
        if (!me.parent_provider_uuid) {
          const sharing = await api.get(
            `/resource_providers?member_of=in:${aggs.join(",")}&required=${SHARING_TRAIT}`,
            { action: "list the sharing providers of the provider's aggregates" },
          );
          sharedBy = sharing.body.resource_providers.filter((p) => p.uuid !== uuid).map((p) => p.uuid);
        }
        const more = await providerNames(ctx, [...sharesWith, ...sharedBy], names);
        more.forEach((value, key) => names.set(key, value));
      }
      if (!state.alive) return;
      clear(heading).append("Provider ", h("span", { class: "name" }, me.name));
      announce(heading, `Provider ${me.name}`);
      status.textContent = `Read at ${time()}.`;
      status.append(" ", reloadButton(() => load()));
      const facts = h(
        "dl",
        { class: "facts wide", id: "provider-facts" },
        h("dt", {}, "Name"),
        h("dd", { class: "p-name" }, me.name),
        h("dt", {}, "UUID"),
        h("dd", {}, h("code", { class: "p-uuid" }, me.uuid)),
        h("dt", {}, "Generation"),
        h("dd", { class: "p-generation" }, String(me.generation)),
        h("dt", {}, "Parent"),
        h(
          "dd",
          { class: "p-parent" },
          me.parent_provider_uuid ? providerRef(names, me.parent_provider_uuid) : "none (a root provider)",
        ),
        h("dt", {}, "Root"),
        h(
          "dd",
          { class: "p-root" },
          me.root_provider_uuid === uuid ? "itself" : providerRef(names, me.root_provider_uuid),
        ),
        h("dt", {}, "Children"),
        h(
          "dd",
          { class: "p-children" },
          children.length
            ? h("ul", { class: "inline-list" }, children.map((c) => h("li", {}, providerLink(c.uuid, c.name))))
            : "none",
        ),
      );
      if (traits.includes(SHARING_TRAIT)) {
        facts.append(
          h("dt", {}, "Shares with"),
          h("dd", { class: "p-shares" }, sharesWith.length ? refList(names, sharesWith) : "no tree"),
        );
      }
      if (sharedBy.length) {
        facts.append(
          h("dt", {}, "Uses shared resources of"),
          h("dd", { class: "p-shared-by" }, refList(names, sharedBy)),
        );
      }
      const consumers = h("div", { id: "consumers" }, h("p", { class: "loading" }, "Reading its consumers…"));
      clear(body).append(
        facts,
        section("Inventories", "inventories-title", inventoryTable(me)),
        section("Traits", "traits-title", chipList(traits, { label: "Traits", empty: "No trait." })),
        section(
          "Aggregates",
          "aggregates-title",
          aggs.length
            ? h(
                "ul",
                { class: "plain-list" },
                aggs.map((a) =>
                  h(
                    "li",
                    {},
                    h("code", {}, a),
                    " ",
                    h(
                      "a",
                      { href: `#/?aggregate=${a}`, "aria-label": `Show the members of aggregate ${a} in the cloud` },
                      "members",
                    ),
                  ),
                ),
              )
            : h("p", { class: "none" }, "No aggregate."),
        ),
        section("Consumers", "consumers-title", consumers),
      );
      await loadConsumers(consumers, me, names);
    } catch (error) {
      if (!state.alive) return;
      status.textContent = "";
      clear(body).append(errorBox(error, { signOut: ctx.signOut }));
    }
  }

  async function loadConsumers(target, me, names) {
    const { api } = ctx;
    let consumers; // uuid -> GET /allocations/{uuid} body
    let note = null;
    try {
      if (api.has("bulkAllocations")) {
        const answer = await api.get(`/allocations?resource_provider_uuid=${uuid}`, {
          action: "read the allocations of the provider's consumers",
        });
        consumers = answer.body.allocations;
      } else {
        const here = await api.get(`/resource_providers/${uuid}/allocations`, {
          action: "read the provider's allocations",
        });
        let ids = Object.keys(here.body.allocations);
        note =
          `This service serves microversions up to ${formatVersion(api.serviceMax)}: reading ` +
          `every consumer's allocations in one request needs ${formatVersion(NEEDS.bulkAllocations)}, ` +
          "so each consumer is read on its own.";
        if (ids.length > MAX_CONSUMERS_ONE_BY_ONE) {
          note += ` Only the first ${MAX_CONSUMERS_ONE_BY_ONE} of ${ids.length} are shown.`;
          ids = ids.slice(0, MAX_CONSUMERS_ONE_BY_ONE);
        }
        consumers = {};
        await pool(ids, 8, async (id) => {
          const answer = await api.get(`/allocations/${id}`, { action: "read a consumer's allocations" });
          consumers[id] = answer.body;
        });
      }
    } catch (error) {
      if (state.alive) clear(target).append(errorBox(error, { signOut: ctx.signOut }));
      return;
    }
    const everyProvider = Object.values(consumers).flatMap((c) => Object.keys(c.allocations || {}));
    const allNames = await providerNames(ctx, everyProvider, names);
    if (!state.alive) return;
    clear(target);
    if (note) target.append(notice(note));
    const ids = Object.keys(consumers).sort();
    if (!ids.length) {
      target.append(h("p", { class: "none" }, `No consumer has allocations against ${me.name}.`));
      return;
    }
    target.append(
      h(
        "table",
        { class: "data consumers", id: "consumers-table" },
        h("caption", {}, `${count(ids.length, "consumer")} with allocations against ${me.name}`),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Consumer", "Project", "User", "Type", `Uses of ${me.name}`, "All its allocations", "Hold"].map(
              (t) => h("th", { scope: "col" }, t),
            ),
          ),
        ),
        h(
          "tbody",
          {},
          ids.map((id) => {
            const c = consumers[id];
            const here = (c.allocations[uuid] || {}).resources || {};
            return h(
              "tr",
              { dataset: { consumer: id } },
              h("th", { scope: "row" }, consumerLink(id)),
              h("td", { class: "c-project" }, c.project_id || "—"),
              h("td", { class: "c-user" }, c.user_id || "—"),
              h("td", { class: "c-type" }, c.consumer_type || (ctx.api.has("consumerType") ? "—" : "(needs 1.38)")),
              h("td", { class: "c-here" }, resourcesText(here)),
              h(
                "td",
                { class: "c-all" },
                h(
                  "ul",
                  { class: "plain-list" },
                  Object.entries(c.allocations).map(([rp, a]) =>
                    h("li", {}, providerRef(allNames, rp), ": ", resourcesText(a.resources)),
                  ),
                ),
              ),
              h("td", { class: "c-hold" }, holdText(c)),
            );
          }),
        ),
      ),
    );
  }

  load();
  return {
    unmount() {
      state.alive = false;
    },
  };
}

function holdText(consumer) {
  if (!("hold" in consumer)) return "—";
  return consumer.hold ? `held until ${consumer.hold.expires_at}` : "confirmed";
}

function inventoryTable(me) {
  const inventories = me.inventories.inventories;
  const usages = me.usages.usages;
  const classes = Object.keys(inventories).sort();
  if (!classes.length) return h("p", { class: "none" }, "No inventory.");
  const columns = ["Class", "Usage", "Used", "Capacity", "Free", "Total", "Reserved"];
  columns.push("Allocation ratio", "Min unit", "Max unit", "Step size");
  return h(
    "table",
    { class: "data inventories", id: "inventory-table" },
    h("caption", { class: "visually-hidden" }, `Inventories of ${me.name}`),
    h("thead", {}, h("tr", {}, columns.map((t) => h("th", { scope: "col" }, t)))),
    h(
      "tbody",
      {},
      classes.map((name) => {
        const inv = inventories[name];
        const used = usages[name] || 0;
        const cap = capacity(inv);
        return h(
          "tr",
          { dataset: { rc: name } },
          h("th", { scope: "row" }, name),
          h(
            "td",
            { class: "bar-cell" },
            bar(used, cap, { label: `${name} used on ${me.name}` }),
            h("span", { class: "bar-text" }, ` ${used} / ${cap}`),
          ),
          h("td", { class: "num used" }, String(used)),
          h("td", { class: "num capacity" }, String(cap)),
          h("td", { class: "num free" }, String(cap - used)),
          h("td", { class: "num" }, String(inv.total)),
          h("td", { class: "num" }, String(inv.reserved)),
          h("td", { class: "num" }, ratio(inv.allocation_ratio)),
          h("td", { class: "num" }, String(inv.min_unit)),
          h("td", { class: "num" }, String(inv.max_unit)),
          h("td", { class: "num" }, String(inv.step_size)),
        );
      }),
    ),
  );
}

export function mountConsumer(main, ctx, uuid) {
  const state = { alive: true };
  if (!UUID.test(uuid)) {
    badUuid(main, "consumer", uuid);
    return { unmount() {} };
  }
  const heading = h("h1", {}, "Consumer ", h("code", {}, uuid));
  const status = h("p", { class: "freshness" }, "Reading its allocations…");
  const body = h("div", { id: "consumer-body" });
  main.append(h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← The cloud")), heading, status, body);
  announce(heading, `Consumer ${shortUuid(uuid)}`);

  async function load() {
    try {
      const answer = await ctx.api.get(`/allocations/${uuid}`, { action: "read the consumer's allocations" });
      const c = answer.body;
      const providers = Object.keys(c.allocations).sort();
      const names = await providerNames(ctx, providers);
      if (!state.alive) return;
      status.textContent = `Read at ${time()}.`;
      status.append(" ", reloadButton(() => load()));
      clear(body);
      if (!providers.length) {
        const words =
          "This consumer has no allocations (it does not exist, or they were removed or their hold expired).";
        body.append(h("p", { class: "none" }, words));
        return;
      }
      const facts = h(
        "dl",
        { class: "facts wide", id: "consumer-facts" },
        h("dt", {}, "Project"),
        h("dd", { class: "c-project" }, c.project_id || "—"),
        h("dt", {}, "User"),
        h("dd", { class: "c-user" }, c.user_id || "—"),
        h("dt", {}, "Type"),
        h("dd", { class: "c-type" }, c.consumer_type || "—"),
        h("dt", {}, "Generation"),
        h("dd", { class: "c-generation" }, c.consumer_generation === undefined ? "—" : String(c.consumer_generation)),
        h("dt", {}, "Hold"),
        h("dd", { class: "c-hold" }, holdText(c)),
      );
      const classes = [...new Set(providers.flatMap((rp) => Object.keys(c.allocations[rp].resources)))].sort();
      const table = h(
        "table",
        { class: "data allocations", id: "allocations-table" },
        h("caption", {}, `Its allocations on ${providers.length} ${providers.length === 1 ? "provider" : "providers"}`),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "col" }, "Provider"),
            [...classes, "Provider generation"].map((name) => h("th", { scope: "col", class: "num" }, name)),
          ),
        ),
        h(
          "tbody",
          {},
          providers.map((rp) => {
            const { resources, generation } = c.allocations[rp];
            return h(
              "tr",
              { dataset: { provider: rp } },
              h("th", { scope: "row" }, providerRef(names, rp)),
              classes.map((name) => h("td", { class: "num", dataset: { rc: name } }, String(resources[name] ?? "—"))),
              h("td", { class: "num" }, generation === undefined ? "—" : String(generation)),
            );
          }),
        ),
      );
      body.append(facts, section("Allocations", "allocations-title", table));
    } catch (error) {
      if (!state.alive) return;
      status.textContent = "";
      clear(body).append(errorBox(error, { signOut: ctx.signOut }));
    }
  }

  load();
  return {
    unmount() {
      state.alive = false;
    },
  };
}
