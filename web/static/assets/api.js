// Calls to the gateway's v1 API. Paths are relative to the page, so the
// dashboard also works behind a proxy that serves the gateway under a prefix.

import { describeProblem } from "./lib.js";

/** An error answer of the API, as {title, status, detail, errors}. */
export class ProblemError extends Error {
  constructor(problem) {
    super(problem.detail || problem.title);
    this.problem = problem;
  }
}

// The bearer token lives in the tab's session storage: it survives reloads
// and is gone when the tab closes. Every API call sends it once it is set.
const TOKEN_KEY = "tsgate.token";

const storage = () => globalThis.sessionStorage;
// Where storage is disabled, the token lasts as long as the page.
let pageToken = "";

/** The stored bearer token, or "". */
export function token() {
  try {
    return storage()?.getItem(TOKEN_KEY) || pageToken;
  } catch {
    return pageToken;
  }
}

/** Stores the bearer token for the API calls of this tab ("" forgets it). */
export function setToken(t) {
  pageToken = t || "";
  try {
    if (t) storage()?.setItem(TOKEN_KEY, t);
    else storage()?.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: pageToken holds it
  }
}

let askToken = null;
let asking = null;

/**
 * Sets ask(problem) → Promise<string|null>, called when the API answers
 * 401: it returns a token to retry with, or null to give up. Concurrent
 * 401s share one question.
 */
export function onUnauthorized(ask) {
  askToken = ask;
}

function tokenAfter401(problem) {
  if (!askToken) return Promise.resolve(null);
  asking ??= Promise.resolve(askToken(problem)).finally(() => (asking = null));
  return asking;
}

/**
 * GETs url (or sends init) and returns its JSON body; throws ProblemError
 * for any failure but an abort. A 401 asks for a token (onUnauthorized) and
 * retries with it.
 */
export async function getJSON(url, signal, init = {}) {
  for (let attempt = 0; ; attempt++) {
    const sent = token();
    const headers = { Accept: "application/json", ...init.headers };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    let res;
    try {
      res = await fetch(url, { ...init, signal, headers });
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ProblemError({
        title: "Gateway unreachable", status: 0, type: "", errors: [], retryAfter: null,
        detail: `The request did not reach the gateway (${err.message}). Is it running?`,
      });
    }
    const text = await res.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: described below
    }
    if (res.status === 401 && attempt < 3) {
      const problem = describeProblem(res.status, res.statusText, body, res.headers.get("Retry-After"));
      // Another call may have stored a fresh token meanwhile.
      if (token() && token() !== sent) continue;
      const t = await tokenAfter401(problem);
      if (signal?.aborted) throw new DOMException("aborted", "AbortError");
      if (t) {
        setToken(t);
        continue;
      }
      throw new ProblemError(problem);
    }
    if (!res.ok) throw new ProblemError(describeProblem(res.status, res.statusText, body, res.headers.get("Retry-After")));
    if (body === null) {
      throw new ProblemError({ title: "Unexpected answer", status: res.status, type: "", retryAfter: null, detail: "The gateway's answer was not JSON.", errors: [] });
    }
    return body;
  }
}

export const seriesPath = (id) => "v1/series/" + encodeURIComponent(id);

/** Whether a page of points brought none: of one series, or of any result of a read by selector. */
const noPoints = (page) => (page.results ? page.results.every((r) => !r.points.length) : page.points.length === 0);

/**
 * Reads every page of a points answer at path (a series' .../points, or
 * v1/points for a selector), following next_cursor until it is absent or
 * maxPages pages were read. query holds the parameters; pageLimit the
 * points per page (per series with a selector; dropped, and the server
 * default used, if the server refuses it). A partial page that delivers
 * nothing new (no point, the same covered range as the page before) means
 * the store keeps failing there: the cursor is then not followed further.
 * Returns {pages, capped, stuck, url}, url being the first page's.
 */
export async function readPages(path, query, { signal, maxPages = 10, pageLimit = 0, onPage } = {}) {
  const pages = [];
  let cursor = "";
  let limit = pageLimit;
  let url = "";
  for (;;) {
    const q = new URLSearchParams(query);
    if (limit) q.set("limit", String(limit));
    if (cursor) q.set("cursor", cursor);
    const u = `${path}?${q}`;
    let page;
    try {
      page = await getJSON(u, signal);
    } catch (err) {
      if (limit && pages.length === 0 && err.problem?.errors?.some((e) => e.param === "limit")) {
        limit = 0; // this gateway allows smaller pages: take its default
        continue;
      }
      throw err;
    }
    if (!url) url = u;
    const prev = pages[pages.length - 1];
    pages.push(page);
    onPage?.(pages.length);
    if (!page.next_cursor) return { pages, capped: false, stuck: false, url };
    const stuck = prev && noPoints(page) && String(prev.covered) === String(page.covered);
    if (stuck) return { pages, capped: false, stuck: true, url };
    if (pages.length >= maxPages) return { pages, capped: true, stuck: false, url };
    cursor = page.next_cursor;
  }
}
