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

const TOKEN_KEY = "tsgate.token";

/**
 * Where the dashboard keeps the gateway's bearer token (the browser's
 * session storage: gone with the tab) and how it asks for one. Tests
 * replace both.
 */
export const auth = {
  storage: () => globalThis.sessionStorage,
  ask: () => globalThis.prompt?.("This gateway needs a token (role read or higher). Token:") ?? null,
};

function authHeaders() {
  const token = auth.storage()?.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

/**
 * GETs url and returns its JSON body; throws ProblemError for any failure
 * but an abort. A 401 asks for a token, keeps it for the session and tries
 * again; a kept token the gateway refuses is forgotten.
 */
export async function getJSON(url, signal) {
  for (let attempt = 0; ; attempt++) {
    const res = await fetchOnce(url, signal);
    if (res.status === 401 && attempt < 3) {
      auth.storage()?.removeItem(TOKEN_KEY);
      const token = auth.ask();
      if (token) {
        auth.storage()?.setItem(TOKEN_KEY, token.trim());
        continue;
      }
    }
    return readAnswer(res);
  }
}

async function fetchOnce(url, signal) {
  try {
    return await fetch(url, { signal, headers: { Accept: "application/json", ...authHeaders() } });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ProblemError({
      title: "Gateway unreachable", status: 0, errors: [],
      detail: `The request did not reach the gateway (${err.message}). Is it running?`,
    });
  }
}

async function readAnswer(res) {
  const text = await res.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: described below
  }
  if (!res.ok) throw new ProblemError(describeProblem(res.status, res.statusText, body));
  if (body === null) {
    throw new ProblemError({ title: "Unexpected answer", status: res.status, detail: "The gateway's answer was not JSON.", errors: [] });
  }
  return body;
}

export const seriesPath = (id) => "v1/series/" + encodeURIComponent(id);

/**
 * Reads every page of a /points answer, following next_cursor until it is
 * absent or maxPages pages were read. query holds the parameters; pageLimit
 * the points per page (dropped, and the server default used, if the server
 * refuses it). A partial page that delivers nothing new (no point, the same
 * covered range as the page before) means the store keeps failing there:
 * the cursor is then not followed further. Returns {pages, capped, stuck,
 * url}, url being the first page's.
 */
export async function readPages(id, query, { signal, maxPages = 10, pageLimit = 0, onPage } = {}) {
  const pages = [];
  let cursor = "";
  let limit = pageLimit;
  let url = "";
  for (;;) {
    const q = new URLSearchParams(query);
    if (limit) q.set("limit", String(limit));
    if (cursor) q.set("cursor", cursor);
    const u = `${seriesPath(id)}/points?${q}`;
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
    const stuck = prev && page.points.length === 0 && String(prev.covered) === String(page.covered);
    if (stuck) return { pages, capped: false, stuck: true, url };
    if (pages.length >= maxPages) return { pages, capped: true, stuck: false, url };
    cursor = page.next_cursor;
  }
}
