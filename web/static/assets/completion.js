// Completion in the selector field, as an ARIA combobox: typing offers the
// metric names, label names or values that fit where the caret is
// (selector.js says which); arrow keys move through them, Enter or Tab
// takes one, Escape closes the list, Ctrl+Space opens it.

import { acceptCompletion, completionContext, rankSuggestions } from "./selector.js";

const CAPTIONS = { metric: () => "metric names", name: () => "label names", value: (ctx) => `values of ${ctx.label}` };

/**
 * Wires input to the listbox list. load(ctx) resolves the items for a
 * completion context (selector.js); stale answers are dropped.
 */
export function attachCompletion(input, list, load) {
  let items = [];
  let active = -1;
  let ctx = null;
  let seq = 0;

  const close = () => {
    seq++;
    items = [];
    active = -1;
    list.hidden = true;
    list.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  };

  const render = () => {
    list.replaceChildren(...items.map((item, i) => {
      const li = document.createElement("li");
      li.id = `${list.id}-${i}`;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", String(i === active));
      li.dataset.i = String(i);
      li.textContent = item;
      return li;
    }));
    list.dataset.caption = CAPTIONS[ctx.kind](ctx);
    list.setAttribute("aria-label", list.dataset.caption);
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    input.setAttribute("aria-activedescendant", `${list.id}-${active}`);
    list.children[active]?.scrollIntoView({ block: "nearest" });
  };

  const update = async () => {
    const mine = ++seq;
    ctx = completionContext(input.value, input.selectionStart ?? input.value.length);
    if (!ctx) return close();
    let all;
    try {
      all = await load(ctx);
    } catch {
      all = [];
    }
    if (mine !== seq) return;
    items = rankSuggestions(all, ctx.prefix);
    // A name typed out in full needs no list.
    if (!items.length || (ctx.kind !== "value" && items.length === 1 && items[0] === ctx.prefix)) return close();
    active = 0;
    render();
  };

  const accept = (i) => {
    const r = acceptCompletion(input.value, ctx, items[i]);
    close();
    input.value = r.text;
    input.setSelectionRange(r.caret, r.caret);
  };

  input.addEventListener("input", update);
  input.addEventListener("blur", close);
  input.addEventListener("keydown", (e) => {
    const open = !list.hidden && items.length > 0;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!open) return update();
      active = (active + (e.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      render();
    } else if ((e.key === "Enter" || e.key === "Tab") && open && !e.shiftKey) {
      e.preventDefault();
      accept(active);
    } else if (e.key === "Escape" && open) {
      e.preventDefault();
      e.stopPropagation();
      close();
    } else if (e.key === " " && e.ctrlKey) {
      e.preventDefault();
      update();
    } else if (["ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown"].includes(e.key)) {
      close();
    }
  });
  // Taking an item with the mouse keeps the focus in the field.
  list.addEventListener("mousedown", (e) => {
    const li = e.target.closest("li");
    e.preventDefault();
    if (li) accept(Number(li.dataset.i));
  });
  return { close };
}
