// PromQL vector selectors as the selector field edits them: where the caret
// is and what fits there (a metric name, a label name, a label's value),
// the selector that narrows those suggestions to the matchers already
// typed, and the text once a suggestion is taken. Nothing here touches the
// DOM or the network (web/dashboard.test.mjs checks it).

const IDENT = /[a-zA-Z_:][a-zA-Z0-9_:]*/y;
const OPS = ["=~", "!~", "!=", "="];
const ESCAPES = { n: "\n", t: "\t", r: "\r", a: "\x07", b: "\b", f: "\f", v: "\v" };

/** The text a quoted string's characters stand for (the opening quote included, the closing one optional). */
function unquote(s) {
  const q = s[0];
  let out = "";
  for (let i = 1; i < s.length; i++) {
    const c = s[i];
    if (c === q) break;
    if (c !== "\\" || q === "`" || i + 1 >= s.length) {
      out += c;
      continue;
    }
    const n = s[++i];
    const hex = { x: 2, u: 4, U: 8 }[n];
    if (hex && /^[0-9a-fA-F]+$/.test(s.substr(i + 1, hex)) && s.substr(i + 1, hex).length === hex) {
      out += String.fromCodePoint(parseInt(s.substr(i + 1, hex), 16));
      i += hex;
    } else out += ESCAPES[n] ?? n;
  }
  return out;
}

/**
 * The tokens of a selector: {type, start, end, value}, type being ident,
 * op (a lone "!" is an op still being typed), str (closed or not), "{",
 * "}", "," or bad. A string's value is the text it stands for.
 */
export function lexSelector(text) {
  const toks = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    IDENT.lastIndex = i;
    const m = IDENT.exec(text);
    const op = OPS.find((o) => text.startsWith(o, i)) ?? (c === "!" ? "!" : "");
    if (m) {
      toks.push({ type: "ident", start: i, end: i + m[0].length, value: m[0] });
    } else if (op) {
      toks.push({ type: "op", start: i, end: i + op.length, value: op });
    } else if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < text.length && text[j] !== c) j += text[j] === "\\" && c !== "`" ? 2 : 1;
      const closed = j < text.length;
      const end = closed ? j + 1 : text.length;
      toks.push({ type: "str", start: i, end, value: unquote(text.slice(i, end)), closed });
    } else {
      toks.push({ type: "{},".includes(c) ? c : "bad", start: i, end: i + 1, value: c });
    }
    i = toks[toks.length - 1].end;
  }
  return toks;
}

/** The matcher of a comma-separated part of the braces, or null when it is not a whole one. */
function matcherOf(toks) {
  const [n, o, s] = toks;
  if (toks.length !== 3 || n.type !== "ident" || o.type !== "op" || o.value === "!" || s.type !== "str" || !s.closed) return null;
  return { name: n.value, op: o.value, value: s.value };
}

/**
 * What to suggest at caret in a selector, or null when nothing fits there:
 * {kind, prefix, from, to, label, op, metric, matchers, used, closed}.
 * kind is "metric" (the name before the braces), "name" (a label name,
 * after "{" or ",") or "value" (after name= or name=~, quoted or not);
 * prefix is what is typed of it before the caret; [from, to) is the text
 * a suggestion replaces; metric and matchers are the selector's other,
 * complete parts (the narrowing); used, the label names they name;
 * closed, whether the braces are closed.
 */
export function completionContext(text, caret) {
  const toks = lexSelector(text);
  const open = toks.findIndex((t) => t.type === "{");
  const close = open < 0 ? -1 : toks.findIndex((t, k) => k > open && t.type === "}");
  const metric = toks[0]?.type === "ident" && open !== 0 ? toks[0].value : "";
  const body = open < 0 ? [] : toks.slice(open + 1, close < 0 ? toks.length : close);
  // The comma-separated parts of the braces, with the span each covers.
  const parts = [];
  let part = { toks: [], start: open < 0 ? 0 : toks[open].end };
  for (const t of body) {
    if (t.type === ",") {
      parts.push({ ...part, end: t.start });
      part = { toks: [], start: t.end };
    } else part.toks.push(t);
  }
  parts.push({ ...part, end: close < 0 ? text.length : toks[close].start });
  const base = { metric, closed: close >= 0, label: "", op: "" };
  const narrowing = (except) => {
    const matchers = parts.filter((p) => p !== except).map((p) => matcherOf(p.toks)).filter(Boolean);
    const used = matchers.map((m) => m.name);
    if (metric) used.push("__name__");
    return { matchers, used };
  };

  const inside = open >= 0 && toks[open].end <= caret && (close < 0 || caret <= toks[close].start);
  if (!inside) {
    if (open >= 0 && caret >= toks[open].end) return null; // past the braces
    const t0 = toks[0];
    const ctx = (prefix, from, to) => ({ ...base, ...narrowing(null), kind: "metric", prefix, from, to, metric: "" });
    if (t0?.type === "ident" && t0.start <= caret && caret <= t0.end) return ctx(text.slice(t0.start, caret), t0.start, t0.end);
    if ((!t0 || t0.type === "{") && text.slice(0, caret).trim() === "") return ctx("", caret, caret);
    return null;
  }
  const cur = parts.find((p) => p.start <= caret && caret <= p.end);
  const [n, o, s, extra] = cur.toks;
  const { matchers, used } = narrowing(cur);
  const ctx = (kind, prefix, from, to) => ({ ...base, kind, prefix, from, to, matchers, used, label: n?.value ?? "", op: o?.value ?? "" });
  if (!n) return ctx("name", "", caret, caret);
  if (n.type !== "ident" || caret < n.start) return null;
  if (caret <= n.end) return ctx("name", text.slice(n.start, caret), n.start, n.end);
  if (!o || o.type !== "op" || o.value === "!" || caret < o.end || extra) return null;
  if (!s || caret <= s.start) return ctx("value", "", caret, s ? s.end : caret);
  if (s.type === "ident" && caret <= s.end) return ctx("value", text.slice(s.start, caret), s.start, s.end);
  if (s.type === "str" && (caret < s.end || !s.closed)) return ctx("value", unquote(text.slice(s.start, caret)), s.start, s.end);
  return null;
}

const isRegex = (op) => op === "=~" || op === "!~";

/** The regular expression of a =~ or !~ matcher, anchored as PromQL anchors it, or null when JavaScript cannot read it. */
function anchored(re) {
  try {
    return new RegExp(`^(?:${re})$`, "u");
  } catch {
    return null;
  }
}

/** Whether a matcher lets a series without the label (the empty value) through. */
export function matchesEmpty({ op, value }) {
  if (op === "=") return value === "";
  if (op === "!=") return value !== "";
  const re = anchored(value);
  const empty = re ? re.test("") : true;
  return op === "=~" ? empty : !empty;
}

/** A value as a PromQL string: double-quoted, escaped as JSON escapes it. */
export const quote = (v) => JSON.stringify(v);

/** A value as the string of a matcher with op: for =~ and !~, its regular-expression characters escaped first. */
export function quoteValue(v, op) {
  return quote(isRegex(op) ? v.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&") : v);
}

/**
 * The selector that narrows suggestions to the parts of ctx already typed
 * (metric name and complete matchers, leaving out regular expressions
 * JavaScript cannot read), or "" when those would not select anything on
 * their own: the API needs one matcher that does not match the empty
 * string.
 */
export function narrowingSelector({ metric = "", matchers = [] }) {
  const keep = matchers.filter((m) => !isRegex(m.op) || anchored(m.value));
  if (!metric && keep.every(matchesEmpty)) return "";
  const inner = keep.map((m) => `${m.name}${m.op}${quote(m.value)}`).join(", ");
  return inner ? `${metric}{${inner}}` : metric;
}

/**
 * Where the suggestions for ctx come from: {url, field, add, exclude}:
 * the API path (relative, with match when the selector narrows them),
 * the field of its answer holding the list, names to add (the pseudo-label
 * series) and names to leave out. null when no list fits (the ids of every
 * series, which GET /v1/series pages through instead).
 */
export function suggestionSource(ctx) {
  const sel = narrowingSelector(ctx);
  const match = sel ? "?match=" + encodeURIComponent(sel) : "";
  if (ctx.kind === "name") return { url: "v1/labels" + match, field: "labels", add: ["series"], exclude: ctx.used ?? [] };
  const label = ctx.kind === "metric" ? "__name__" : ctx.label;
  if (label === "series" && !sel) return null;
  return { url: `v1/labels/${encodeURIComponent(label)}/values${match}`, field: "values", add: [], exclude: [] };
}

/**
 * The items to offer for what is typed: those starting with prefix first,
 * then those holding it elsewhere (ignoring case), each group in the
 * given order, at most max.
 */
export function rankSuggestions(items, prefix, max = 50) {
  const p = prefix.toLowerCase();
  const starts = [];
  const holds = [];
  for (const it of items) {
    const l = it.toLowerCase();
    if (l.startsWith(p)) starts.push(it);
    else if (l.includes(p)) holds.push(it);
  }
  return starts.concat(holds).slice(0, max);
}

/**
 * The selector once item is taken in ctx: {text, caret}. A name replaces
 * the one being typed; a value replaces the value (quoted, and escaped for
 * a regular expression), and closes the braces if they are open.
 */
export function acceptCompletion(text, ctx, item) {
  const ins = ctx.kind === "value" ? quoteValue(item, ctx.op) : item;
  const head = text.slice(0, ctx.from) + ins;
  const tail = text.slice(ctx.to) + (ctx.kind === "value" && !ctx.closed ? "}" : "");
  return { text: head + tail, caret: head.length };
}
