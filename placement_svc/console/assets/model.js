// The cloud in memory: providers, their trees, and who shares with whom.
// Built from GET /resource_providers?include=... (1.45) or, below 1.45,
// from the plain list with details filled in per provider as they are read.

import { capacity } from "./ui.js";

export const SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE";
export const INCLUDE = "inventories,usages,traits,aggregates";

const NO_CHILDREN = Object.freeze([]); // shared by the leaves (most providers)

function byName(providers) {
  return (a, b) => {
    const x = providers.get(a).name;
    const y = providers.get(b).name;
    return x < y ? -1 : x > y ? 1 : 0;
  };
}

export class Model {
  /** ``list``: the resource_providers of a list answer. Details (the
   * included bodies) may be absent: then ``detailed`` is false and
   * ``setDetails`` fills them in later. */
  constructor(list) {
    this.providers = new Map();
    this.detailed = true;
    this._trees = new Map(); // root uuid -> its providers, depth first (see ``members``)
    this._vocabulary = null;
    const all = new Array(list.length);
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      const provider = {
        uuid: item.uuid,
        name: item.name,
        generation: item.generation,
        parent: item.parent_provider_uuid || null,
        root: item.root_provider_uuid || item.uuid,
        children: NO_CHILDREN, // replaced by an array of its own at the first child
        details: null,
        depth: 0,
        // Worked out once, when a filter or the screen first needs them.
        lower: null, // the name in lower case
        signature: null, // what its card shows, as a string (cloud.js)
      };
      if (item.inventories && item.usages && item.traits && item.aggregates) {
        provider.details = {
          inventories: item.inventories.inventories,
          usages: item.usages.usages,
          traits: item.traits.traits,
          aggregates: item.aggregates.aggregates,
        };
      } else {
        this.detailed = false;
      }
      this.providers.set(item.uuid, provider);
      all[i] = provider;
    }
    const roots = [];
    for (const provider of all) {
      const parent = provider.parent && this.providers.get(provider.parent);
      if (parent) {
        if (parent.children === NO_CHILDREN) parent.children = [];
        parent.children.push(provider.uuid);
      } else {
        roots.push(provider);
      }
    }
    const order = byName(this.providers);
    for (const provider of all) if (provider.children.length > 1) provider.children.sort(order);
    roots.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.roots = roots.map((provider) => provider.uuid);
    for (const root of this.roots) this.members(root); // and so each one's depth
    this.computeSharing();
  }

  setDetails(uuid, details) {
    const provider = this.providers.get(uuid);
    if (provider) {
      provider.details = details;
      provider.signature = null;
    }
    this._vocabulary = null;
  }

  /** Each sharing provider's list of roots it shares with, and each root's
   * list of sharing providers. Needs traits and aggregates of everyone
   * (detailed model), or ``sharingHint`` from the degraded reads. */
  computeSharing(hint = null) {
    this.sharesWith = new Map(); // sharing uuid -> [root uuid]
    this.sharedBy = new Map(); // root uuid -> [sharing uuid]
    this.sharing = new Set();
    const rootsByAggregate = new Map();
    if (hint) {
      for (const [uuid, roots] of hint) {
        this.sharing.add(uuid);
        this.sharesWith.set(uuid, roots);
      }
      // What the cards say about sharing has changed.
      for (const provider of this.providers.values()) provider.signature = null;
    } else {
      if (!this.detailed) return;
      const wanted = new Set(); // the aggregates of the sharing providers
      for (const provider of this.providers.values()) {
        if (provider.details.traits.includes(SHARING_TRAIT)) {
          this.sharing.add(provider.uuid);
          for (const agg of provider.details.aggregates) wanted.add(agg);
        }
      }
      if (wanted.size) {
        for (const provider of this.providers.values()) {
          for (const agg of provider.details.aggregates) {
            if (!wanted.has(agg)) continue;
            if (!rootsByAggregate.has(agg)) rootsByAggregate.set(agg, new Set());
            rootsByAggregate.get(agg).add(provider.root);
          }
        }
      }
      for (const uuid of this.sharing) {
        const provider = this.providers.get(uuid);
        const roots = new Set();
        for (const agg of provider.details.aggregates) {
          for (const root of rootsByAggregate.get(agg) || []) if (root !== provider.root) roots.add(root);
        }
        this.sharesWith.set(uuid, [...roots].sort(byName(this.providers)));
      }
    }
    for (const [uuid, roots] of this.sharesWith) {
      for (const root of roots) {
        if (!this.sharedBy.has(root)) this.sharedBy.set(root, []);
        this.sharedBy.get(root).push(uuid);
      }
    }
    // Sharing providers' trees first, then the others, each by name.
    const sharingRoots = new Set([...this.sharing].map((uuid) => this.providers.get(uuid)?.root).filter(Boolean));
    this.roots = [
      ...this.roots.filter((root) => sharingRoots.has(root)),
      ...this.roots.filter((root) => !sharingRoots.has(root)),
    ];
  }

  /** Every provider of the tree of ``root``, depth first (parents first):
   * their uuids. */
  tree(root) {
    return this.members(root).map((provider) => provider.uuid);
  }

  /** The same, as the provider objects; worked out once per tree (with
   * each one's ``depth``) and shared (do not change the array). */
  members(root) {
    let out = this._trees.get(root);
    if (out) return out;
    out = [];
    const top = this.providers.get(root);
    top.depth = 0;
    const stack = [top]; // iterative: a deep tree must not overflow the stack
    while (stack.length) {
      const provider = stack.pop();
      out.push(provider);
      const children = provider.children;
      for (let i = children.length - 1; i >= 0; i--) {
        const child = this.providers.get(children[i]);
        child.depth = provider.depth + 1;
        stack.push(child);
      }
    }
    this._trees.set(root, out);
    return out;
  }

  /** The names seen: traits, aggregates, classes (for the filters' lists). */
  vocabulary() {
    if (this._vocabulary) return this._vocabulary;
    const traits = new Set();
    const aggregates = new Set();
    const classes = new Set();
    for (const provider of this.providers.values()) {
      if (!provider.details) continue;
      for (const t of provider.details.traits) traits.add(t);
      for (const a of provider.details.aggregates) aggregates.add(a);
      for (const c in provider.details.inventories) classes.add(c);
    }
    this._vocabulary = { traits: [...traits].sort(), aggregates: [...aggregates].sort(), classes: [...classes].sort() };
    return this._vocabulary;
  }
}

/** Free room of ``className`` on a provider: capacity - used, or null. */
export function free(provider, className) {
  const inventory = provider.details && provider.details.inventories[className];
  if (!inventory) return null;
  return capacity(inventory) - (provider.details.usages[className] || 0);
}

/** The filters, as read from the URL or the form. */
export function readFilters(params) {
  const freeText = (params.get("free") || "").trim();
  const match = /^([A-Z0-9_]+):(\d+)$/.exec(freeText);
  return {
    name: (params.get("name") || "").trim(),
    trait: (params.get("trait") || "").trim(),
    aggregate: (params.get("aggregate") || "").trim(),
    rc: (params.get("rc") || "").trim(),
    freeClass: match ? match[1] : "",
    freeAmount: match ? Number(match[2]) : 0,
  };
}

export function filtersActive(filters) {
  return Boolean(filters.name || filters.trait || filters.aggregate || filters.rc || filters.freeClass);
}

/** A test of a provider against the filters, the filters worked out once
 * (not once per provider). Below 1.45 the server-side ones are given as
 * ``serverSet``. */
export function matcher(filters, serverSet = null) {
  const tests = [];
  if (filters.name) {
    const wanted = filters.name.toLowerCase();
    tests.push((provider) => (provider.lower ??= provider.name.toLowerCase()).includes(wanted));
  }
  if (serverSet) {
    tests.push((provider) => serverSet.has(provider.uuid));
  } else {
    if (filters.trait) {
      const negated = filters.trait.startsWith("!");
      const trait = negated ? filters.trait.slice(1) : filters.trait;
      tests.push((provider) => Boolean(provider.details) && provider.details.traits.includes(trait) !== negated);
    }
    if (filters.aggregate) {
      const wanted = filters.aggregate.toLowerCase();
      tests.push(
        (provider) => Boolean(provider.details) && provider.details.aggregates.some((agg) => agg.startsWith(wanted)),
      );
    }
    if (filters.rc) {
      const rc = filters.rc;
      tests.push((provider) => Boolean(provider.details && provider.details.inventories[rc]));
    }
    if (filters.freeClass) {
      const { freeClass, freeAmount } = filters;
      tests.push((provider) => {
        const room = free(provider, freeClass);
        return room !== null && room >= freeAmount;
      });
    }
  }
  if (!tests.length) return () => true;
  if (tests.length === 1) return tests[0];
  return (provider) => {
    for (const test of tests) if (!test(provider)) return false;
    return true;
  };
}

/** Does a provider match the filters worked out in memory? (Below 1.45 the
 * server-side ones are given as ``serverSet``.) */
export function matches(provider, filters, serverSet = null) {
  return matcher(filters, serverSet)(provider);
}
