// The console's only door to the Placement API: the token, the microversion
// negotiated from the version document, and errors worded for a person.

const TOKEN_KEY = "placement-console-token";

// The newest microversion this console was written against. It never asks
// for more than this, nor for more than the service serves.
export const CONSOLE_MAX = [1, 51];
// Below this there is no tree of providers (in_tree, parent and root).
export const CONSOLE_MIN = [1, 14];

// What each feature needs.
export const NEEDS = {
  consumerType: [1, 38],
  explain: [1, 44],
  include: [1, 45],
  bulkAllocations: [1, 46],
  etag: [1, 47],
  holds: [1, 51],
};

function meta(name, fallback) {
  const element = document.querySelector(`meta[name="${name}"]`);
  const value = element ? element.getAttribute("content") : null;
  // The page read straight from disk, never filled in: say so plainly.
  return value === null || value.includes("{{") ? fallback : value;
}

export function parseVersion(text) {
  const match = /^(\d+)\.(\d+)$/.exec(String(text || "").trim());
  return match ? [Number(match[1]), Number(match[2])] : null;
}

export function formatVersion(version) {
  return version ? `${version[0]}.${version[1]}` : "?";
}

export function atLeast(version, wanted) {
  return version[0] > wanted[0] || (version[0] === wanted[0] && version[1] >= wanted[1]);
}

/** A refusal or failure of the API, with what the console was doing. */
export class ApiError extends Error {
  constructor({ status, title, detail, code, action, path }) {
    super(`${status} ${title}: ${detail}`);
    this.status = status;
    this.title = title;
    this.detail = detail || "";
    this.code = code || "";
    this.action = action || "read the API";
    this.path = path || "";
  }

  /** The detail's non-empty lines, trimmed. */
  get detailLines() {
    return this.detail
      .replace(/<br\s*\/?>/gi, "\n")
      .split(/\n/)
      .map((line) => line.trim())
      .filter((line) => line !== "");
  }

  /** The policy rule named by a 403, if any. */
  get rule() {
    const match = /Policy does not allow (\S+) to be performed/.exec(this.detail);
    return match ? match[1] : "";
  }

  /** A plain sentence saying what went wrong. */
  get sentence() {
    if (this.status === 401) {
      return `The service did not accept your token to ${this.action}: sign out and sign in again with a valid one.`;
    }
    if (this.status === 403) {
      const rule = this.rule ? ` (policy rule ${this.rule})` : " (policy)";
      return `Your token is not allowed to ${this.action}${rule}.`;
    }
    if (this.status === 400) return `The service refused the request to ${this.action}: it is malformed.`;
    if (this.status === 404) return `Nothing was found when trying to ${this.action}.`;
    if (this.status === 0) return `The service could not be reached to ${this.action}.`;
    return `The service failed to ${this.action}.`;
  }
}

async function errorFrom(response, action, path) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const first = body && Array.isArray(body.errors) && body.errors.length ? body.errors[0] : body || {};
  const code = first.code && !/^\d{3} /.test(first.code) ? first.code : "";
  return new ApiError({
    status: response.status,
    title: first.title || response.statusText || `HTTP ${response.status}`,
    detail: first.detail || first.message || "",
    code,
    action,
    path,
  });
}

export class Api {
  constructor() {
    this.root = meta("placement-root", "/"); // always ends with "/"
    if (!this.root.endsWith("/")) this.root += "/";
    this.auth = meta("placement-auth", "noauth2");
    this.serviceMax = null;
    this.serviceMin = null;
    this.version = null; // what the console asks for
  }

  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  signIn(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
  }

  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
  }

  url(path) {
    return this.root + path.replace(/^\//, "");
  }

  has(feature) {
    return this.version !== null && atLeast(this.version, NEEDS[feature]);
  }

  /** Read the version document (no token needed) and settle the
   * microversion: the service's max, or the console's if lower. */
  async negotiate() {
    let response;
    try {
      response = await fetch(this.root, { headers: { Accept: "application/json" }, cache: "no-store" });
    } catch (error) {
      const action = "read the version document";
      throw new ApiError({ status: 0, title: "Unreachable", detail: String(error), action });
    }
    if (!response.ok) throw await errorFrom(response, "read the version document", "/");
    const body = await response.json();
    const current = (body.versions || [])[0] || {};
    this.serviceMax = parseVersion(current.max_version) || [1, 0];
    this.serviceMin = parseVersion(current.min_version) || [1, 0];
    this.version = atLeast(this.serviceMax, CONSOLE_MAX) ? CONSOLE_MAX : this.serviceMax;
    return this.version;
  }

  /**
   * GET ``path`` (relative to the API root). ``action`` words what it is
   * for ("list resource providers"), for errors. ``etag``: sent as
   * If-None-Match (from 1.47). Answers {status, body, etag, text}; a 304
   * has no body. Anything but 200/304 throws an ApiError.
   */
  async get(path, { action = "read the API", etag = null, accept = "application/json" } = {}) {
    const headers = {
      Accept: accept,
      "OpenStack-API-Version": `placement ${formatVersion(this.version)}`,
    };
    if (this.token !== null) headers["X-Auth-Token"] = this.token;
    if (etag && this.has("etag")) headers["If-None-Match"] = etag;
    let response;
    try {
      response = await fetch(this.url(path), { headers, cache: "no-store" });
    } catch (error) {
      throw new ApiError({ status: 0, title: "Unreachable", detail: String(error), action, path });
    }
    if (response.status === 304) {
      return { status: 304, body: null, text: null, etag: response.headers.get("ETag") || etag };
    }
    if (!response.ok) throw await errorFrom(response, action, path);
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null, text, etag: response.headers.get("ETag") };
  }

  /**
   * A provider's four reads below 1.45 (no include=), at once: the bodies of
   * its inventories, usages, traits and aggregates. ``whose`` words the
   * errors' action ("a provider's", "the provider's").
   */
  async details(uuid, whose) {
    const base = `/resource_providers/${uuid}`;
    const [inventories, usages, traits, aggregates] = await Promise.all(
      ["inventories", "usages", "traits", "aggregates"].map((name) =>
        this.get(`${base}/${name}`, { action: `read ${whose} ${name}` }),
      ),
    );
    return { inventories: inventories.body, usages: usages.body, traits: traits.body, aggregates: aggregates.body };
  }
}

/** Run ``worker`` over ``items`` with at most ``limit`` at once. */
export async function pool(items, limit, worker) {
  const results = new Array(items.length);
  let next = 0;
  async function lane() {
    while (next < items.length) {
      const index = next++;
      results[index] = await worker(items[index], index);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
