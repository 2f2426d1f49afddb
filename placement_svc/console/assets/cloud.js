// The cloud (#/): every root provider with its tree, usage bars, traits and
// aggregates, sharing providers and whom they share with; filters worked
// out on the data in memory; pages of trees; a refresh every few seconds
// that sends the last ETag and leaves the screen alone on a 304.

import { formatVersion, NEEDS, pool } from "./api.js";
import { filtersActive, free, INCLUDE, matcher, Model, readFilters, SHARING_TRAIT } from "./model.js";
import {
  aggregate,
  announce,
  bar,
  chipList,
  clear,
  count,
  errorBox,
  h,
  notice,
  onPick,
  providerLink,
  time,
  usageText,
} from "./ui.js";

export const PAGE_SIZE = 50; // trees per page (per_page=N in the URL: 1 to 500)
const DEFAULT_REFRESH = 5; // seconds
const DEGRADED_REFRESH = 30; // seconds: below 1.45 a refresh is many reads
const SERVER_FILTER_DELAY = 150; // ms without a change before a filter is asked of the API
const KEEP_TREES = 100; // trees drawn kept to be shown again, beyond a page's
const KEEP_CARDS = 1000; // providers' cards kept to be copied (or five per tree of a page, if more)

/** The seconds between refreshes the URL asks for (refresh=N, 0: never),
 * or null when it does not say. */
function askedPeriod(params) {
  const value = params.get("refresh");
  return value !== null && /^\d+(\.\d+)?$/.test(value) ? Number(value) : null;
}

export function mountCloud(main, ctx, params) {
  const { api } = ctx;
  const degraded = !api.has("include");
  const state = {
    alive: true,
    model: null,
    text: null, // the last list answer's text, when it had no ETag (to tell "unchanged")
    etag: null,
    updated: null,
    filters: readFilters(params),
    page: Math.max(1, Number(params.get("page")) || 1),
    perPage: Math.min(500, Math.max(1, Number(params.get("per_page")) || PAGE_SIZE)),
    asked: askedPeriod(params),
    period: askedPeriod(params) ?? (degraded ? DEGRADED_REFRESH : DEFAULT_REFRESH),
    timer: null,
    shown: [], // roots of the trees that match, in order
    matched: new Set(), // providers that match (or, with no filter, all: has() and size)
    serverSets: new Map(), // below 1.45: filter query -> Set of uuids
    renders: 0,
  };

  const heading = h("h1", {}, "The cloud");
  const freshness = h("p", { id: "freshness", class: "freshness" }, "Reading the cloud…");
  // In memory a filter takes milliseconds even at 10,000 providers: it runs
  // as soon as the input events queued are handled (a burst of keys, or a
  // paste, is one run). Below 1.45 it is a request: wait for a pause.
  const filterForm = buildFilters(state, () => applyFilters(), degraded ? SERVER_FILTER_DELAY : 0);
  const summary = h("p", { id: "summary", class: "summary", "aria-live": "polite" });
  const pagerTop = buildPager("top");
  const pagerBottom = buildPager("bottom");
  const trees = h("ol", { id: "trees", class: "trees", "aria-label": "Provider trees" });
  const problems = h("div", { id: "problems" });
  main.append(heading, freshness);
  if (degraded) {
    main.append(
      notice(
        `This service serves microversions up to ${formatVersion(api.serviceMax)}: reading every ` +
          `provider with its inventories, usages, traits and aggregates in one request needs ` +
          `${formatVersion(NEEDS.include)}. The console reads each visible provider's details ` +
          `one by one, filters by trait, aggregate and class through the API, and refreshes every ` +
          `${state.period} s.`,
      ),
    );
  } else if (!api.has("etag")) {
    main.append(
      notice(
        `This service serves microversions up to ${formatVersion(api.serviceMax)}: "not modified" ` +
          `answers need ${formatVersion(NEEDS.etag)}, so every refresh reads the whole cloud.`,
      ),
    );
  }
  filterForm.hidden = true; // until there is a cloud to filter
  main.append(problems, filterForm, summary, pagerTop, trees, pagerBottom);
  onPick(trees, (name, value) => setFilter(name, value)); // the trait and aggregate chips
  announce(heading, "The cloud");

  // ---- reading ---------------------------------------------------------

  function every() {
    return state.period > 0 ? ` Refreshes every ${state.period} s.` : " Not refreshed (refresh=0).";
  }

  async function load() {
    const started = performance.now();
    try {
      let answer;
      if (degraded) {
        answer = await api.get("/resource_providers", { action: "list the resource providers" });
      } else {
        answer = await api.get(`/resource_providers?include=${INCLUDE}`, {
          action: "list the resource providers with their inventories, usages, traits and aggregates",
          etag: state.etag,
        });
      }
      if (!state.alive) return;
      // Unless the URL sets the period, a big cloud is read less often: at
      // most a tenth of the time goes to reading it.
      if (state.asked === null) {
        const spent = (performance.now() - started) / 1000;
        const base = degraded ? DEGRADED_REFRESH : DEFAULT_REFRESH;
        state.period = Math.max(base, Math.ceil(spent * 10));
      }
      clear(problems);
      if (answer.status === 304 || (!degraded && answer.text !== null && answer.text === state.text)) {
        // Nothing changed: not one node of the trees is touched.
        if (answer.etag) state.etag = answer.etag;
        freshness.textContent = `Unchanged since ${time(state.updated)} (checked ${time()}).${every()}`;
        return;
      }
      const model = new Model(answer.body.resource_providers);
      if (degraded) await degradedDetails(model);
      if (!state.alive) return;
      // With an ETag the next read says itself whether anything changed:
      // the text (megabytes for a big cloud) is not kept to compare.
      state.text = answer.etag ? null : answer.text;
      state.etag = answer.etag;
      state.model = model;
      ctx.cloud = model;
      state.updated = new Date();
      freshness.textContent = `Updated ${time(state.updated)}.${every()}`;
      filterForm.refreshLists(model);
      filterForm.hidden = false;
      if (await computeMatches()) render();
    } catch (error) {
      if (!state.alive) return;
      clear(problems).append(errorBox(error, { signOut: ctx.signOut }));
      freshness.textContent = state.updated
        ? `Last updated ${time(state.updated)}; the last refresh failed (${time()}).`
        : "Could not read the cloud.";
    }
  }

  /** Below 1.45: carry the details read before over to the new model (to
   * be shown until they are read again: no flash of empty cards), and find
   * the sharing providers through the API. ``render`` then reads the
   * details of the providers of the visible page. */
  async function degradedDetails(model) {
    if (state.model) {
      for (const [uuid, provider] of state.model.providers) {
        if (provider.details && model.providers.has(uuid)) {
          model.setDetails(uuid, provider.details);
          model.providers.get(uuid).stale = true;
        }
      }
    }
    const sharing = await api.get(`/resource_providers?required=${SHARING_TRAIT}`, {
      action: "list the sharing providers",
    });
    const hint = new Map();
    await pool(sharing.body.resource_providers, 4, async (item) => {
      const aggs = await api.get(`/resource_providers/${item.uuid}/aggregates`, {
        action: "read a sharing provider's aggregates",
      });
      const list = aggs.body.aggregates;
      let roots = [];
      if (list.length) {
        const members = await api.get(`/resource_providers?member_of=in:${list.join(",")}`, {
          action: "list the members of a sharing provider's aggregates",
        });
        const rootSet = new Set(members.body.resource_providers.map((p) => p.root_provider_uuid || p.uuid));
        rootSet.delete(item.root_provider_uuid || item.uuid);
        roots = [...rootSet].filter((root) => model.providers.has(root));
      }
      hint.set(item.uuid, roots);
    });
    model.computeSharing(hint);
    state.serverSets.clear();
  }

  async function readDetails(model, uuids) {
    const missing = uuids.filter((uuid) => {
      const provider = model.providers.get(uuid);
      return !provider.details || provider.stale;
    });
    await pool(missing, 8, async (uuid) => {
      const read = await api.details(uuid, "a provider's");
      model.setDetails(uuid, {
        inventories: read.inventories.inventories,
        usages: read.usages.usages,
        traits: read.traits.traits,
        aggregates: read.aggregates.aggregates,
      });
      model.providers.get(uuid).stale = false;
    });
  }

  /** Below 1.45 the filters other than the name are asked of the API. */
  async function serverSet(filters) {
    const parts = [];
    if (filters.trait) parts.push(`required=${encodeURIComponent(filters.trait)}`);
    if (filters.aggregate) parts.push(`member_of=${encodeURIComponent(filters.aggregate)}`);
    if (filters.rc) parts.push(`resources=${encodeURIComponent(filters.rc)}:1`);
    if (filters.freeClass && filters.freeAmount > 0) {
      parts.push(`resources=${encodeURIComponent(filters.freeClass)}:${filters.freeAmount}`);
    } else if (filters.freeClass) {
      parts.push(`resources=${encodeURIComponent(filters.freeClass)}:1`);
    }
    if (!parts.length) return null;
    // resources= repeated is not allowed: merge them.
    const resources = parts.filter((p) => p.startsWith("resources=")).map((p) => p.slice(10));
    const others = parts.filter((p) => !p.startsWith("resources="));
    if (resources.length) others.push(`resources=${resources.join(",")}`);
    const query = others.join("&");
    if (!state.serverSets.has(query)) {
      const answer = await api.get(`/resource_providers?${query}`, { action: "filter the resource providers" });
      state.serverSets.set(query, new Set(answer.body.resource_providers.map((p) => p.uuid)));
    }
    return state.serverSets.get(query);
  }

  /** Work out which providers match the filters; false when the model
   * or the filters changed meanwhile (a newer call renders instead). */
  async function computeMatches() {
    const model = state.model;
    const filters = state.filters;
    let set = null;
    if (degraded) {
      try {
        set = await serverSet(filters);
      } catch (error) {
        clear(problems).append(errorBox(error, { signOut: ctx.signOut }));
        set = new Set();
      }
      if (model !== state.model || filters !== state.filters || !state.alive) return false;
    }
    if (!set && !filtersActive(filters)) {
      // Everything matches: no set of every uuid to build.
      state.matched = { size: model.providers.size, has: (uuid) => model.providers.has(uuid) };
      state.shown = model.roots;
    } else {
      const test = matcher(filters, set);
      const matched = new Set();
      const shown = [];
      for (const root of model.roots) {
        let any = false;
        for (const provider of model.members(root)) {
          if (test(provider)) {
            matched.add(provider.uuid);
            any = true;
          }
        }
        if (any) shown.push(root);
      }
      state.matched = matched;
      state.shown = shown;
    }
    const pages = Math.max(1, Math.ceil(state.shown.length / state.perPage));
    if (state.page > pages) state.page = pages;
    return true;
  }

  // ---- rendering -------------------------------------------------------

  function render() {
    const model = state.model;
    const start = (state.page - 1) * state.perPage;
    const visible = state.shown.slice(start, start + state.perPage);
    const active = filtersActive(state.filters);
    const matchedTrees = state.shown.length;
    const whole = `${count(model.providers.size, "provider")} in ${count(model.roots.length, "tree")}`;
    const verb = state.matched.size === 1 ? "matches" : "match";
    summary.textContent = active
      ? `${count(state.matched.size, "provider")} ${verb} the filters, ` +
        `in ${count(matchedTrees, "tree")} (the cloud: ${whole}).`
      : `The cloud: ${whole}.`;
    summary.dataset.matched = String(state.matched.size);
    summary.dataset.trees = String(matchedTrees);
    renderPager(pagerTop, start, visible.length);
    renderPager(pagerBottom, start, visible.length);
    reconcile(visible);
    state.renders += 1;
    trees.dataset.renders = String(state.renders);
    if (degraded) {
      const wanted = visible.flatMap((root) => model.tree(root)).filter((uuid) => {
        const provider = model.providers.get(uuid);
        return !provider.details || provider.stale;
      });
      if (wanted.length) {
        readDetails(model, wanted)
          .then(() => {
            if (state.alive && state.model === model) reconcile(visible);
          })
          .catch((error) => {
            if (state.alive) clear(problems).append(errorBox(error, { signOut: ctx.signOut }));
          });
      }
    }
  }

  /** A pager: built once, updated in place (its buttons keep the focus
   * across refreshes). */
  function buildPager(where) {
    const nav = h("nav", { class: "pager", "aria-label": `Pages of trees (${where})` });
    nav.previous = h("button", { type: "button", class: "previous" }, "← Previous");
    nav.next = h("button", { type: "button", class: "next" }, "Next →");
    nav.where = h("span", { class: "where" });
    nav.previous.addEventListener("click", () => goTo(state.page - 1, nav, nav.next));
    nav.next.addEventListener("click", () => goTo(state.page + 1, nav, nav.previous));
    nav.append(nav.previous, nav.where, nav.next);
    return nav;
  }

  function renderPager(nav, start, shown) {
    const total = state.shown.length;
    const pages = Math.max(1, Math.ceil(total / state.perPage));
    const words = total
      ? `Trees ${start + 1}–${start + shown} of ${total} (page ${state.page} of ${pages})`
      : "No tree matches the filters.";
    if (nav.where.textContent !== words) nav.where.textContent = words;
    nav.previous.disabled = state.page <= 1;
    nav.next.disabled = state.page >= pages;
    nav.classList.toggle("single", pages <= 1);
  }

  function goTo(page, nav, other) {
    state.page = page;
    writeUrl();
    render();
    // The button pressed keeps the focus, unless it has just been disabled
    // (first or last page): then the other one takes it.
    const focus = document.activeElement;
    if (!focus || focus === document.body || focus.disabled) other.focus();
    if (nav === pagerBottom) trees.scrollIntoView({ block: "start" });
  }

  /** Make the list show ``visible`` trees, reusing every tree element
   * whose content has not changed (no flicker, scroll and focus kept). */
  function reconcile(visible) {
    const model = state.model;
    const active = document.activeElement;
    const focused = active && trees.contains(active) ? active.dataset.key : null;
    const existing = new Map();
    for (const li of trees.children) existing.set(li.dataset.root, li);
    let cursor = trees.firstElementChild;
    for (const root of visible) {
      const keep = shownProviders(model, root);
      const signature = treeSignature(model, root, keep);
      let li = existing.get(root);
      if (!li || li._signature !== signature) {
        const fresh = drawnTree(model, root, keep, signature);
        if (li) {
          li.replaceWith(fresh);
          if (cursor === li) cursor = fresh;
        }
        existing.set(root, fresh);
        li = fresh;
      }
      if (li !== cursor) trees.insertBefore(li, cursor);
      else cursor = cursor.nextElementSibling;
    }
    const keep = new Set(visible);
    for (const li of [...trees.children]) if (!keep.has(li.dataset.root)) li.remove();
    if (focused && !(document.activeElement && trees.contains(document.activeElement))) {
      const again = trees.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus({ preventScroll: true });
    }
  }

  function shownProviders(model, root) {
    // The providers that match, and their ancestors (shown for context).
    const keep = new Set();
    for (const provider of model.members(root)) {
      if (!state.matched.has(provider.uuid)) continue;
      let id = provider.uuid;
      while (id && model.providers.has(id) && !keep.has(id)) {
        keep.add(id);
        id = model.providers.get(id).parent;
      }
    }
    return keep;
  }

  /** What a provider's card shows, as a string; worked out once per model
   * (``setDetails`` and a new sharing hint clear it). */
  function providerSignature(model, p) {
    p.signature ??= JSON.stringify([
      p.uuid,
      p.name,
      p.generation,
      p.parent,
      p.depth,
      p.details,
      model.sharing.has(p.uuid),
      (model.sharesWith.get(p.uuid) || []).map((r) => model.providers.get(r).name),
      (model.sharedBy.get(p.uuid) || []).map((r) => model.providers.get(r).name),
    ]);
    return p.signature;
  }

  /** What a tree shows, as a string: two trees with the same one look the
   * same. */
  function treeSignature(model, root, keep) {
    let out = root;
    for (const p of model.members(root)) {
      if (keep.has(p.uuid)) out += (state.matched.has(p.uuid) ? "\n+" : "\n-") + providerSignature(model, p);
    }
    return out;
  }

  // The trees drawn lately, by signature, the least recently used first: a
  // filter cleared or a page seen again puts the same elements back.
  const drawn = new Map();

  function drawnTree(model, root, keep, signature) {
    let li = drawn.get(signature);
    if (li) {
      drawn.delete(signature);
    } else {
      li = renderTree(model, root, keep);
      li._signature = signature;
    }
    drawn.set(signature, li);
    const limit = state.perPage + KEEP_TREES;
    for (const old of drawn.keys()) {
      if (drawn.size <= limit) break;
      drawn.delete(old);
    }
    return li;
  }

  function renderTree(model, root, keep) {
    const li = renderProvider(model, root, keep);
    li.classList.add("tree");
    li.dataset.root = root;
    return li;
  }

  function renderProvider(model, uuid, keep) {
    const p = model.providers.get(uuid);
    const isSharing = model.sharing.has(uuid);
    const matched = state.matched.has(uuid);
    const li = h(
      "li",
      {
        class: ["provider", isSharing && "is-sharing", matched ? "match" : "context"],
        dataset: { uuid, match: String(matched) },
        "aria-labelledby": `p-${uuid}`,
      },
      cardOf(model, p, matched),
    );
    const children = p.children.filter((child) => keep.has(child));
    if (children.length) {
      li.append(
        h(
          "ul",
          { class: "children", "aria-label": `Children of ${p.name}` },
          children.map((child) => renderProvider(model, child, keep)),
        ),
      );
    }
    return li;
  }

  // The providers' cards (heading, usage, tags, sharing) built lately, by
  // what they show, the least recently used first. A card is built once;
  // a tree that shows it again (another filter, page or refresh) gets a
  // copy, which is much cheaper to make. Its buttons work through the one
  // listener on the list (onPick), which copies keep.
  const cards = new Map();

  function cardOf(model, p, matched) {
    const key = (matched ? "+" : "-") + providerSignature(model, p);
    const built = cards.get(key);
    if (built) {
      cards.delete(key);
      cards.set(key, built);
      return built.cloneNode(true);
    }
    const card = renderCard(model, p, matched);
    cards.set(key, card);
    const limit = Math.max(KEEP_CARDS, 5 * state.perPage);
    for (const old of cards.keys()) {
      if (cards.size <= limit) break;
      cards.delete(old);
    }
    return card;
  }

  function renderCard(model, p, matched) {
    const uuid = p.uuid;
    const isSharing = model.sharing.has(uuid);
    const link = providerLink(uuid, p.name);
    link.dataset.key = `link:${uuid}`;
    const card = skeleton("card");
    const head = card.firstChild;
    const uuidText = head.firstChild;
    uuidText.append(uuid);
    head.insertBefore(
      h(`h${Math.min(2 + (p.depth || 0), 6)}`, { id: `p-${uuid}`, class: p.parent ? "child-name" : "root-name" }, link),
      uuidText,
    );
    if (isSharing) head.insertBefore(h("span", { class: "badge sharing" }, "sharing provider"), uuidText);
    if (!matched) {
      head.insertBefore(
        h("span", { class: "badge context" }, "does not match the filters (shown for its children)"),
        uuidText,
      );
    }
    if (!p.details) {
      card.append(h("p", { class: "loading" }, "Reading its inventories, usages, traits and aggregates…"));
    } else {
      card.append(usageTable(p));
      const traitChips = chipList(p.details.traits, {
        label: `Traits of ${p.name}`,
        pick: "trait",
        title: (t) => `Show the providers with ${t}`,
      });
      if (p.details.traits.length) {
        for (const b of traitChips.getElementsByTagName("button")) b.dataset.key = `trait:${uuid}:${b.textContent}`;
      }
      const aggs = p.details.aggregates.length
        ? h(
            "ul",
            { class: "chips", "aria-label": `Aggregates of ${p.name}` },
            p.details.aggregates.map((agg) => {
              const button = aggregate(agg, { pick: "aggregate" });
              button.dataset.key = `agg:${uuid}:${agg}`;
              return h("li", {}, button);
            }),
          )
        : skeleton("none");
      const tags = skeleton("tags"); // two groups: a label, then the chips
      tags.firstChild.lastChild.append(traitChips);
      tags.lastChild.lastChild.append(aggs);
      card.append(tags);
    }
    if (isSharing) {
      const roots = model.sharesWith.get(uuid) || [];
      card.append(
        h(
          "p",
          { class: "shares" },
          h("span", { class: "label" }, "Shares its resources with "),
          roots.length
            ? joinLinks(model, roots, `share:${uuid}`)
            : h("span", { class: "none" }, "no tree (no other provider is in its aggregates)"),
        ),
      );
    }
    const sharedBy = model.sharedBy.get(uuid) || [];
    if (sharedBy.length) {
      card.append(
        h(
          "p",
          { class: "shared-by" },
          h("span", { class: "label" }, "Uses shared resources of "),
          joinLinks(model, sharedBy, `sharedby:${uuid}`),
        ),
      );
    }
    return card;
  }

  function joinLinks(model, uuids, key) {
    const out = h("span", { class: "links" });
    uuids.forEach((root, index) => {
      if (index) out.append(", ");
      const link = providerLink(root, model.providers.get(root)?.name || root);
      link.dataset.key = `${key}:${root}`;
      out.append(link);
    });
    return out;
  }

  function usageTable(p) {
    const classes = Object.keys(p.details.inventories).sort();
    if (!classes.length) return h("p", { class: "none no-inventory" }, "No inventory.");
    const table = skeleton("usage");
    const caption = table.firstChild;
    const tbody = table.lastChild;
    caption.textContent = `Usage of ${p.name}`;
    for (const name of classes) tbody.append(usageRow(p, name));
    return table;
  }

  function usageRow(p, name) {
    const inventory = p.details.inventories[name];
    const used = p.details.usages[name] || 0;
    const words = usageText(used, inventory);
    const tr = skeleton("row");
    tr.setAttribute("data-rc", name);
    const th = tr.firstChild;
    const cell = th.nextSibling;
    const numbers = tr.lastChild;
    th.textContent = name;
    cell.append(bar(used, words.cap, { label: `${name} used on ${p.name}` }));
    const usedCap = numbers.firstChild;
    const inventoryText = usedCap.nextSibling.nextSibling; // after a space
    const freeText = numbers.lastChild;
    usedCap.textContent = words.head;
    inventoryText.textContent = words.tail;
    if (words.over) numbers.insertBefore(h("strong", { class: "over" }, " over capacity"), inventoryText.nextSibling);
    freeText.textContent = `free ${free(p, name)}`;
    return tr;
  }

  // ---- filters ---------------------------------------------------------

  function setFilter(name, value) {
    filterForm.set(name, value);
    applyFilters();
  }

  async function applyFilters() {
    state.filters = filterForm.read();
    state.page = 1;
    writeUrl();
    if (!state.model) return;
    if ((await computeMatches()) && state.alive) render();
  }

  function writeUrl() {
    const out = new URLSearchParams();
    const f = state.filters;
    if (f.name) out.set("name", f.name);
    if (f.trait) out.set("trait", f.trait);
    if (f.aggregate) out.set("aggregate", f.aggregate);
    if (f.rc) out.set("rc", f.rc);
    if (f.freeClass) out.set("free", `${f.freeClass}:${f.freeAmount}`);
    if (state.page > 1) out.set("page", String(state.page));
    if (params.has("per_page")) out.set("per_page", params.get("per_page"));
    if (params.has("refresh")) out.set("refresh", params.get("refresh"));
    const query = out.toString().replace(/%3A/gi, ":").replace(/%2C/gi, ","); // readable
    history.replaceState(history.state, "", `#/${query ? "?" + query : ""}`);
  }

  // ---- refreshing ------------------------------------------------------

  async function tick() {
    state.timer = null;
    if (document.hidden && state.model) {
      // A tab nobody looks at reads nothing; it catches up when shown.
      state.stale = true;
      return;
    }
    await load();
    if (state.alive && state.period > 0) state.timer = setTimeout(tick, state.period * 1000);
  }

  function shown() {
    if (!document.hidden && state.stale && state.alive) {
      state.stale = false;
      clearTimeout(state.timer);
      tick();
    }
  }

  document.addEventListener("visibilitychange", shown);
  tick();

  return {
    unmount() {
      state.alive = false;
      clearTimeout(state.timer);
      document.removeEventListener("visibilitychange", shown);
    },
  };
}

function tagGroup(label, kind, content) {
  return h("span", { class: "tag-group" }, h("span", { class: "label" }, label), h("span", { class: kind }, content));
}

// The parts every card has, built once and copied (cloneNode) for each: a
// page of trees has hundreds of cards, and a copy costs far less than a
// build. The caller fills them in.
let skeletons = null;

function skeleton(name) {
  skeletons ??= {
    // The heading and badges go before the uuid.
    card: h(
      "div",
      { class: "card" },
      h("div", { class: "head" }, h("span", { class: "uuid" }, h("span", { class: "visually-hidden" }, "uuid "))),
    ),
    usage: h(
      "table",
      { class: "usage" },
      h("caption", { class: "visually-hidden" }),
      h(
        "thead",
        { class: "visually-hidden" },
        h("tr", {}, ["Class", "Usage", "Used / capacity"].map((t) => h("th", { scope: "col" }, t))),
      ),
      h("tbody"),
    ),
    row: h(
      "tr",
      {},
      h("th", { scope: "row" }),
      h("td", { class: "bar-cell" }),
      h(
        "td",
        { class: "numbers" },
        h("span", { class: "used-cap" }),
        " ",
        h("span", { class: "inventory" }),
        " ",
        h("span", { class: "free" }),
      ),
    ),
    tags: h("div", { class: "tags" }, tagGroup("Traits", "traits"), tagGroup("Aggregates", "aggregates")),
    none: h("span", { class: "none" }, "none"),
  };
  return skeletons[name].cloneNode(true);
}

/** The filter form; ``onchange`` runs (debounced by ``delay`` ms) on
 * every change. */
function buildFilters(state, onchange, delay) {
  const f = state.filters;
  let pending = null;
  const changed = () => {
    clearTimeout(pending);
    pending = setTimeout(onchange, delay);
  };
  const field = (id, text, control, hint = null) =>
    h(
      "div",
      { class: "field" },
      h("label", { for: id }, text),
      control,
      hint ? h("small", { id: `${id}-hint`, class: "hint" }, hint) : null,
    );
  const text = (id, value, more = {}) =>
    h("input", { id, type: "text", value, autocomplete: "off", spellcheck: "false", oninput: changed, ...more });
  const name = text("f-name", f.name, { type: "search" });
  const trait = text("f-trait", f.trait, { list: "traits-list", "aria-describedby": "f-trait-hint" });
  const agg = text("f-aggregate", f.aggregate, { list: "aggregates-list", "aria-describedby": "f-aggregate-hint" });
  const rc = h("select", { id: "f-rc", onchange: changed }, h("option", { value: "" }, "any"));
  const freeClass = h(
    "select",
    { id: "f-free-class", onchange: changed, "aria-describedby": "f-free-hint" },
    h("option", { value: "" }, "any class (off)"),
  );
  const freeAmount = text("f-free-amount", f.freeClass ? String(f.freeAmount) : "1", {
    type: "number",
    min: "0",
    step: "1",
    "aria-label": "at least this many free",
  });
  const traitsList = h("datalist", { id: "traits-list" });
  const aggsList = h("datalist", { id: "aggregates-list" });
  const reset = h("button", { type: "reset", class: "secondary" }, "Clear filters");
  const form = h(
    "form",
    { id: "filters", class: "filters", role: "search", "aria-label": "Filter the providers" },
    field("f-name", "Name contains", name),
    field("f-trait", "Trait", trait, "!TRAIT: without it"),
    field("f-aggregate", "Aggregate", agg, "a uuid or its start"),
    field("f-rc", "Resource class", rc),
    h(
      "div",
      { class: "field free-field" },
      h("label", { for: "f-free-class" }, "Has free"),
      h("span", { class: "inline" }, freeClass, h("span", { "aria-hidden": "true" }, " ≥ "), freeAmount),
      h("small", { id: "f-free-hint", class: "hint" }, "free = capacity − used"),
    ),
    h("div", { class: "field actions" }, reset),
    traitsList,
    aggsList,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(pending);
    onchange();
  });
  form.addEventListener("reset", () => {
    setTimeout(() => {
      freeAmount.value = "1";
      clearTimeout(pending);
      onchange();
    });
  });
  const fillSelect = (select, values, keep) => {
    const current = select.value || keep;
    const first = select.firstElementChild;
    clear(select).append(first);
    const all = new Set(values);
    if (current) all.add(current);
    for (const value of [...all].sort()) select.append(h("option", { value, selected: value === current }, value));
    select.value = current;
  };
  let listed = null; // the names in the lists now
  form.refreshLists = (model) => {
    const words = model.vocabulary();
    const names = JSON.stringify(words);
    if (names === listed) return; // the same: no option is touched
    listed = names;
    clear(traitsList).append(...words.traits.map((t) => h("option", { value: t })));
    clear(aggsList).append(...words.aggregates.map((a) => h("option", { value: a })));
    fillSelect(rc, words.classes, state.filters.rc);
    fillSelect(freeClass, words.classes, state.filters.freeClass);
  };
  form.read = () => {
    const params = new URLSearchParams();
    params.set("name", name.value);
    params.set("trait", trait.value.trim().toUpperCase());
    params.set("aggregate", agg.value);
    params.set("rc", rc.value);
    const amount = Math.max(0, Math.floor(Number(freeAmount.value) || 0));
    if (freeClass.value) params.set("free", `${freeClass.value}:${amount}`);
    return readFilters(params);
  };
  form.set = (which, value) => {
    if (which === "trait") trait.value = value;
    if (which === "aggregate") agg.value = value;
  };
  return form;
}
