// deskdex's web UI: search as you type, keyboard use, the preview's jumps between hits, and the
// duplicates of a hit. Every page works without this file; it fetches the same server-rendered,
// escaped fragments, so no text of a document or a file name is ever parsed as HTML here.
"use strict";

(function () {
  const csrf = () => (document.querySelector('meta[name="csrf"]') || {}).content || "";

  // -- search as you type ---------------------------------------------------------------------------
  const form = document.getElementById("search-form");
  const box = document.getElementById("q");
  const results = document.getElementById("results");
  let pending = null, timer = null, shown = null;

  function params(page) {
    const p = new URLSearchParams(new FormData(form));
    if (page && page > 1) p.set("page", String(page)); else p.delete("page");
    return p;
  }

  async function refresh(page, typing) {
    const p = params(page);
    const key = p.toString();
    if (key === shown) return;
    if (pending) pending.abort();
    pending = new AbortController();
    const started = performance.now();
    try {
      // typing=1: the server also matches the unfinished last word as a prefix
      const r = await fetch("/results?" + key + (typing ? "&typing=1" : ""),
                            {signal: pending.signal, credentials: "same-origin"});
      if (r.status === 401 || r.redirected) { window.location.reload(); return; }
      const html = await r.text();
      results.innerHTML = html;  // the server's template escaped every value in it
      shown = key;
      history.replaceState(null, "", p.get("q") || p.get("similar") ? "/?" + key : "/");
      results.dataset.renderedMs = String(Math.round((performance.now() - started) * 10) / 10);
      results.dataset.renderedQuery = p.get("q") || "";
      results.dispatchEvent(new CustomEvent("deskdex:rendered", {detail: {query: p.get("q")}}));
      loadFacets(pending.signal);
    } catch (e) {
      if (e.name !== "AbortError") results.dataset.error = String(e);
    }
  }

  // The facets of the results just shown, asked for after them (the server counts 1,000 matches).
  async function loadFacets(signal) {
    const aside = document.querySelector("#facets[data-src]");
    if (!aside) return;
    try {
      const r = await fetch(aside.dataset.src, {signal, credentials: "same-origin"});
      if (!r.ok || !aside.isConnected) return;
      aside.outerHTML = await r.text();  // escaped by the server's template, as the results
    } catch (e) {
      if (e.name !== "AbortError") aside.dataset.error = String(e);
    }
  }

  if (form && box && results) {
    shown = params().toString();
    box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => refresh(1, true), 120); });
    document.getElementById("sort").addEventListener("change", () => refresh(1));
    const words = document.getElementById("words");
    if (words) words.addEventListener("change", () => refresh(1));
    form.addEventListener("submit", (e) => { e.preventDefault(); clearTimeout(timer); shown = null; refresh(1); });
    results.addEventListener("click", (e) => {
      const a = e.target.closest("a.facet-link, nav.pager a");
      if (!a) return;
      e.preventDefault();
      const url = new URL(a.href, window.location.href);
      box.value = url.searchParams.get("q") || "";
      refresh(Number(url.searchParams.get("page") || 1));
    });
  }

  // -- a hit's duplicates and similar documents, when its group is opened ---------------------------
  document.addEventListener("toggle", async (e) => {
    const d = e.target;
    if (!(d instanceof HTMLDetailsElement) || !d.open || !d.classList.contains("group") || d.dataset.loaded) return;
    d.dataset.loaded = "1";
    const body = d.querySelector(".group-body");
    const r = await fetch("/api/similar?uri=" + encodeURIComponent(d.dataset.uri), {credentials: "same-origin"});
    if (!r.ok) return;
    const data = await r.json();
    const list = document.createElement("ul");
    for (const h of data.hits) {
      if (h.uri === d.dataset.uri) continue;
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = "/doc?uri=" + encodeURIComponent(h.uri);
      a.textContent = h.path || h.uri;  // text, never HTML
      li.append(a);
      list.append(li);
    }
    body.prepend(list);
  }, true);

  // -- keyboard ---------------------------------------------------------------------------------------
  function hitLinks() { return Array.from(document.querySelectorAll(".hit-list a.title")); }
  document.addEventListener("keydown", (e) => {
    const inField = e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement ||
      e.target instanceof HTMLTextAreaElement;
    if (e.key === "/" && !inField) { const q = document.getElementById("q"); if (q) { e.preventDefault(); q.focus(); q.select(); } return; }
    if (e.key === "Escape" && inField) { e.target.blur(); return; }
    const links = hitLinks();
    if ((e.key === "ArrowDown" || e.key === "ArrowUp") && links.length && (!inField || e.target === box)) {
      e.preventDefault();
      const at = links.indexOf(document.activeElement);
      const next = e.key === "ArrowDown" ? Math.min(at + 1, links.length - 1) : at - 1;
      if (next < 0) { box && box.focus(); } else { links[next].focus(); links[next].closest("li").scrollIntoView({block: "nearest"}); }
      return;
    }
    if (!inField && document.getElementById("doc")) {
      if (e.key === "n" || e.key === "j") { e.preventDefault(); jump(1); }
      if (e.key === "p" || e.key === "k") { e.preventDefault(); jump(-1); }
    }
  });

  // -- the preview: jump between hits -----------------------------------------------------------------
  const marks = Array.from(document.querySelectorAll("#doc mark.hit"));
  let current = -1;
  function jump(step) {
    if (!marks.length) return;
    if (current >= 0) marks[current].classList.remove("current");
    current = (current + step + marks.length) % marks.length;
    const m = marks[current];
    m.classList.add("current");
    m.scrollIntoView({block: "center"});
    const where = document.getElementById("hit-where");
    if (where) {
      const block = m.closest("[data-page]");
      const page = block && block.dataset.page ? " · page " + block.dataset.page : "";
      where.textContent = "hit " + (current + 1) + " of " + marks.length + page;
    }
    history.replaceState(null, "", "#" + m.id);
  }
  for (const [id, step] of [["next-hit", 1], ["prev-hit", -1]]) {
    const b = document.getElementById(id);
    if (b) b.addEventListener("click", (e) => { e.preventDefault(); jump(step); });
  }
  if (marks.length && !window.location.hash) jump(1);

  window.deskdex = {csrf, refresh, jump};
})();
