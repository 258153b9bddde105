// The search page: reads its state from the URL (?q=&category=&k=&question=), asks the
// JSON API and renders. No framework, no build step. Text from the archive is only ever
// set as text (textContent), never parsed as HTML.
"use strict";

(() => {
  const K_STEP = 10;
  const K_MAX = 100;
  const $ = (selector) => document.querySelector(selector);
  const form = $("#search");
  const box = $("#q");
  const statusLine = $("#status");
  const didYouMean = $("#did-you-mean");
  const intro = $("#intro");
  const hitList = $("#hits");
  const more = $("#more");
  const questionView = $("#question");
  const facet = $("#facet");
  const tagFacet = $("#tag-facet");
  const suggestBox = $("#suggest");
  const suggestList = $("#suggest-list");
  const askedPart = $("#asked");
  const completePart = $("#complete");
  const completeList = $("#complete-list");
  let completing = null; // AbortController of the completion request in flight
  const SUGGEST_DELAY_MS = 200; // typing pauses this long before the archive is asked
  let suggestTimer = null;
  let suggesting = null; // AbortController of the suggestion request in flight
  let lastInput = 0; // when the box last changed (performance.now())
  let categories = null; // {categories: [{name, count}], n_docs}
  let tags = null; // {tags: [{name, count}], n_tags}
  let pending = null; // AbortController of the request in flight
  let fromResults = false; // the question view was opened from the results (back = history)

  // -- state in the URL ----------------------------------------------------------------
  function readState() {
    const p = new URLSearchParams(location.search);
    const k = Math.min(K_MAX, Math.max(K_STEP, parseInt(p.get("k"), 10) || K_STEP));
    return { q: (p.get("q") || "").trim(), category: p.get("category") || "", k,
             question: p.get("question") || "" };
  }

  function urlFor(state) {
    const p = new URLSearchParams();
    if (state.q) p.set("q", state.q);
    if (state.category) p.set("category", state.category);
    if (state.k && state.k !== K_STEP) p.set("k", String(state.k));
    if (state.question) p.set("question", state.question);
    const query = p.toString();
    return query ? "?" + query : location.pathname;
  }

  function go(state, { replace = false } = {}) {
    const url = urlFor(state);
    if (replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
    render();
  }

  // -- DOM helpers ---------------------------------------------------------------------
  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) {
        node.append(typeof child === "string" ? document.createTextNode(child) : child);
      }
    }
    return node;
  }

  // Segments [{text, match}] as text nodes with <mark> around the matches.
  function marked(segments) {
    return segments.map((s) => (s.match ? el("mark", { text: s.text })
                                         : document.createTextNode(s.text)));
  }

  function number(x) {
    if (x === 0) return "0";
    return Math.abs(x) >= 100 ? x.toFixed(1) : x.toPrecision(3);
  }

  // The day of a hit's ISO 8601 date ("2014-03-05T10:00:00Z" -> "2014-03-05").
  function day(date) {
    return date.slice(0, 10);
  }

  // A short hit's meta line: category, day, answers.
  function hitMeta(hit) {
    return [hit.category, hit.date && day(hit.date), counted(hit.n_answers, "answer")]
      .filter(Boolean).join(" · ");
  }

  // "1 question", "2 questions", "1 category", "3 categories"
  function counted(n, noun) {
    const plural = noun.endsWith("y") ? noun.slice(0, -1) + "ies" : noun + "s";
    return `${n.toLocaleString()} ${n === 1 ? noun : plural}`;
  }

  function setStatus(text, isError = false) {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", isError);
  }

  async function api(path, params = {}) {
    if (pending) pending.abort();
    pending = new AbortController();
    return getJSON(path, params, pending.signal);
  }

  // A JSON answer of the API: its body, or an Error with the server's detail (an abort's
  // AbortError as it is).
  async function getJSON(path, params, signal) {
    const url = path + (Object.keys(params).length ? "?" + new URLSearchParams(params) : "");
    const response = await fetch(url, { signal, headers: { Accept: "application/json" } });
    let body = null;
    try { body = await response.json(); } catch (e) {
      if (e.name === "AbortError") throw e;  // a newer request took over mid-body
      body = null;
    }
    if (!response.ok) {
      const detail = body && body.detail ? body.detail : response.statusText;
      throw new Error(detail);
    }
    if (body === null) throw new Error("the server's answer could not be read");
    return body;
  }

  // -- the category facet --------------------------------------------------------------
  async function loadCategories() {
    try {
      const [cats, tagged] = await Promise.all(["/api/categories", "/api/tags?limit=20"].map(
        async (url) => {
          const response = await fetch(url, { headers: { Accept: "application/json" } });
          const body = await response.json();
          if (!response.ok) throw new Error(body.detail || response.statusText);
          return body;
        }));
      categories = cats;
      tags = tagged;
    } catch (e) {
      categories = null;
      setStatus(e.message, true);
    }
  }

  // A tag as the query syntax's exact filter: tag:NAME (quoted when it has a space).
  function tagClause(name) {
    return /[\s"]/.test(name) ? `tag:"${name.replace(/"/g, "")}"` : `tag:${name}`;
  }

  // The tag facet: a tag adds (or, when the query has it, removes) its tag: filter. With
  // the facets of a search's hits, their tags and counts (else the archive's).
  function renderTags(state, facets = null) {
    tagFacet.replaceChildren();
    const nav = tagFacet.closest("nav");
    const entries = facets ? facets.tags : tags && tags.tags;
    nav.hidden = !entries || !entries.length;
    $("#tags-title").textContent = facets ? "Tags of these results" : "Tags";
    if (nav.hidden) return;
    const words = state.q.split(/\s+/).filter(Boolean);
    for (const entry of entries) {
      const clause = tagClause(entry.name);
      const active = words.some((w) => w.toLowerCase() === clause.toLowerCase());
      const q = active ? words.filter((w) => w.toLowerCase() !== clause.toLowerCase()).join(" ")
                       : [...words, clause].join(" ");
      const target = { q, category: state.category, k: K_STEP };
      tagFacet.append(el("li", {}, el("a", {
        href: urlFor(target), "aria-current": active ? "true" : null,
        "aria-label": `tag ${entry.name}, ${counted(entry.count, "question")}`,
        onclick: (event) => { event.preventDefault(); go(target); },
      }, el("span", { class: "name", text: entry.name }),
         el("span", { class: "count", text: entry.count.toLocaleString() }))));
    }
  }

  // The category facet: the archive's categories, or with the facets of a search's hits,
  // the categories of the hits and how many hits each has (the active one always listed).
  function renderFacet(state, active, facets = null) {
    facet.replaceChildren();
    if (!categories || !categories.categories.length) {
      facet.closest("nav").hidden = true;
      return;
    }
    facet.closest("nav").hidden = false;
    $("#facet-title").textContent = facets ? "Categories of these results" : "Categories";
    let listed = categories.categories;
    let total = categories.n_docs;
    if (facets) {
      listed = facets.categories.slice();
      total = facets.categories.reduce((n, c) => n + c.count, 0);
      const folded = (active || "").toLowerCase();
      if (active && !listed.some((c) => c.name.toLowerCase() === folded)) {
        listed.push({ name: active, count: 0 });
      }
    }
    const entries = [{ name: "", label: "All categories", count: total },
                     ...listed.map((c) => ({ name: c.name, label: c.name, count: c.count }))];
    const wanted = active || "";
    const exact = entries.some((e) => e.name === wanted);  // "Travel" and "travel" may both exist
    for (const entry of entries) {
      const selected = exact ? entry.name === wanted
                             : entry.name.toLowerCase() === wanted.toLowerCase();
      const target = { q: state.q, category: entry.name, k: K_STEP };
      const link = el("a", {
        href: urlFor(target), "aria-current": selected ? "true" : null,
        "aria-label": `${entry.label}, ${counted(entry.count, "question")}`,
        onclick: (event) => { event.preventDefault(); go(target); },
      }, el("span", { class: "name", text: entry.label }),
         el("span", { class: "count", text: entry.count.toLocaleString() }));
      facet.append(el("li", {}, link));
    }
  }

  // -- results -------------------------------------------------------------------------
  // The two parts of a hit's hybrid first-stage score (what made it a candidate).
  function firstStage(parts, ranked) {
    const p = el("p", { class: "first-stage" });
    p.append(el("strong", { text: ranked ? "Candidate score " : "Score " }),
      `${number(parts.score)} = ${number(1 - parts.a)} × ${parts.term_model} ` +
      `${number(parts.term)} / ${number(parts.term_max)} (the query's best ${parts.term_model}) ` +
      `+ ${number(parts.a)} × cosine ${number(parts.cosine)} (question vectors: words learned ` +
      `from the archive)`);
    return p;
  }

  function explanation(hit, ranking) {
    const stage = hit.first_stage ? firstStage(hit.first_stage, Boolean(ranking.ranker)) : null;
    const rows = [];
    const ranker = ranking.ranker;
    let caption;
    if (ranker && hit.contributions) {
      const values = Object.entries(hit.contributions);
      const largest = Math.max(1e-12, ...values.map(([, c]) => Math.abs(c)));
      for (const [name, c] of values) {
        const bar = el("span", { class: "bar " + (c < 0 ? "neg" : "pos") });
        bar.style.width = `${(100 * Math.abs(c)) / largest}%`;
        rows.push(el("tr", {}, el("th", { scope: "row", text: name }),
                      el("td", { text: number(hit.features[name]) }),
                      el("td", { class: "num", text: (c > 0 ? "+" : "") + number(c) }),
                      el("td", { class: "barcell", "aria-hidden": "true" }, bar)));
      }
      caption = `Score ${number(hit.score)} = the ${ranker.learner || ranker.name} ranker's ` +
        `feature contributions` + (ranker.intercept ? ` ${ranker.intercept >= 0 ? "+" : "−"} ` +
        `intercept ${number(Math.abs(ranker.intercept))}` : "") +
        ` (on the top ${ranker.n_candidates} ` +
        `${ranking.hybrid ? `${ranking.retrieval} + word-vector` : ranking.retrieval} candidates)`;
      return [stage, el("table", {}, el("caption", { text: caption }),
                el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "feature" }),
                                   el("th", { scope: "col", text: "value" }),
                                   el("th", { scope: "col", text: "contribution" }),
                                   el("th", { scope: "col", class: "barcell" },
                                      el("span", { class: "visually-hidden", text: "bar" })))),
                el("tbody", {}, rows))];
    }
    for (const [name, value] of Object.entries(hit.features)) {
      rows.push(el("tr", { class: name === ranking.retrieval ? "key" : null },
                    el("th", { scope: "row", text: name }),
                    el("td", { class: "num", text: number(value) })));
    }
    caption = hit.first_stage
      ? `No trained ranker: hits are in the order of the score above. Every feature score of this hit:`
      : `No trained ranker: hits are in ${ranking.retrieval} order (score = ` +
        `${ranking.retrieval}). Every feature score of this hit:`;
    return [stage, el("table", {}, el("caption", { text: caption }),
              el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "feature" }),
                                 el("th", { scope: "col", text: "value" }))),
              el("tbody", {}, rows))];
  }

  function renderHit(hit, state, ranking) {
    const target = { ...state, question: hit.id };
    const titleId = `hit-${hit.rank}`;
    const meta = [];
    if (hit.category) meta.push(el("span", { class: "category", text: hit.category }));
    if (hit.date) meta.push(el("time", { datetime: hit.date, text: day(hit.date) }));
    meta.push(el("span", { text: `score ${number(hit.score)}` }));
    meta.push(el("span", { text: counted(hit.n_answers, "answer") }));
    if (hit.url) {
      meta.push(el("a", { href: hit.url, rel: "noopener noreferrer", target: "_blank",
                          text: "original post ↗" }));
    }
    return el("li", { class: "hit" }, el("article", { "aria-labelledby": titleId },
      el("h2", { class: "hit-title", id: titleId },
         el("a", { href: urlFor(target), class: "hit-link", dataset: { doc: hit.id },
                   onclick: (event) => { event.preventDefault(); fromResults = true; go(target); } },
            marked(hit.title_marked))),
      el("p", { class: "meta" }, meta.flatMap((m, i) => (i ? [" · ", m] : [m]))),
      hit.snippet_marked.length ? el("p", { class: "snippet" }, marked(hit.snippet_marked)) : null,
      hit.answer ? el("div", { class: "answer" },
                      el("span", { class: "label", text: hit.answer.label }),
                      el("p", {}, marked(hit.answer.snippet_marked))) : null,
      el("details", { class: "why" }, el("summary", { text: "Why this rank" }),
         ...explanation(hit, ranking))));
  }

  function renderDidYouMean(data, state) {
    didYouMean.replaceChildren();
    const missing = data.unknown_words.filter((w) => !(data.suggestions[w] || []).length);
    if (data.did_you_mean) {
      const target = { q: data.did_you_mean, category: state.category, k: K_STEP };
      didYouMean.append("Did you mean ",
        el("a", { href: urlFor(target), onclick: (event) => { event.preventDefault(); go(target); } },
           el("strong", { text: data.did_you_mean })), "?");
    }
    if (missing.length) {
      didYouMean.append(data.did_you_mean ? " " : "",
        `Not in the archive: ${missing.map((w) => `“${w}”`).join(", ")}.`);
    }
    const notes = [];
    // how the query was read: the filters applied, and what was not read as syntax
    if (data.filters.length) notes.push(`Filters: ${data.filters.join(" ")}.`);
    for (const notice of data.notices) notes.push(`Note: ${notice}.`);
    if (data.relaxed) notes.push("No question has every required word or phrase: questions with the words.");
    if (data.matched_in === "answers") notes.push("No question holds these words: questions whose answers do.");
    if (notes.length) didYouMean.append(didYouMean.childNodes.length ? " " : "", notes.join(" "));
    didYouMean.hidden = !didYouMean.childNodes.length;
  }

  async function search(state) {
    const params = { q: state.q, k: String(state.k), explain: "true" };
    if (state.category) params.category = state.category;
    setStatus("Searching…");
    document.body.setAttribute("aria-busy", "true");
    const started = performance.now();
    let data;
    try {
      data = await api("/api/search", params);
    } catch (e) {
      if (e.name === "AbortError") return;
      hitList.replaceChildren();
      didYouMean.hidden = true;
      more.hidden = true;
      setStatus(e.message, true);
      return;
    } finally {
      document.body.removeAttribute("aria-busy");
    }
    const ms = Math.round(performance.now() - started);
    renderFacet(state, data.category || state.category, data.facets);
    renderTags(state, data.facets);
    renderDidYouMean(data, state);
    const where = data.category ? ` in ${data.category}` : "";
    const ranking = data.ranking;
    const first = ranking.hybrid ? `${ranking.retrieval} + word vectors` : ranking.retrieval;
    const order = ranking.ranker ? `${first} + ${ranking.ranker.learner || ranking.ranker.name} ranker`
                                 : first;
    setStatus(data.hits.length
      ? `${data.hits.length === state.k ? "Top " : ""}${data.hits.length} ` +
        `${data.hits.length === 1 ? "question" : "questions"}${where} · ranked by ${order} · ${ms} ms`
      : data.query_terms.length || data.unknown_words.length
        ? `No matching questions${where}.`
        : "No words to search for: the index leaves out its stopwords (very common words) " +
          "and words too short to index.");
    hitList.replaceChildren(...data.hits.map((hit) => renderHit(hit, state, ranking)));
    more.hidden = !(data.hits.length === state.k && state.k < K_MAX);
  }

  // -- one question with all its answers -------------------------------------------------
  async function showQuestion(state) {
    setStatus("Loading…");
    let q;
    try {
      q = await api("/api/questions/" + encodeURIComponent(state.question));
    } catch (e) {
      if (e.name === "AbortError") return;
      setStatus(e.message, true);
      return;
    }
    setStatus("");
    const back = { ...state, question: "" };
    const answers = q.answers.map((text, i) => el("li", { class: i === q.best_answer ? "best" : null },
      i === q.best_answer ? el("span", { class: "label", text: "best answer" }) : null,
      el("p", { class: "text", text })));
    const meta = [];
    if (q.category) meta.push(el("span", { class: "category", text: q.category }));
    if (q.tags.length) meta.push(el("span", { text: "tags: " + q.tags.join(", ") }));
    if (q.url) meta.push(el("a", { href: q.url, rel: "noopener noreferrer", target: "_blank",
                                   text: "original post ↗" }));
    meta.push(el("span", { class: "id", text: q.id }));
    questionView.replaceChildren(
      el("p", {}, el("a", { href: urlFor(back), class: "back", onclick: (event) => {
        event.preventDefault();
        if (fromResults) history.back(); else go(back);
      } }, state.q ? "← Back to the results" : "← Search")),
      el("h2", { id: "question-title", text: q.title || q.id }),
      el("p", { class: "meta" }, meta.flatMap((m, i) => (i ? [" · ", m] : [m]))),
      q.body ? el("p", { class: "text body", text: q.body }) : null,
      el("h3", { text: counted(q.answers.length, "answer") }),
      q.answers.length ? el("ol", { class: "answers" }, answers) : el("p", { text: "No answers." }));
    document.title = `${q.title || q.id} – cqa_search`;
    questionView.querySelector(".back").focus();
    return showSimilar(state, q.id);
  }

  // The questions most similar to the one shown ("asked before"), below its answers.
  async function showSimilar(state, id) {
    const section = el("aside", { class: "similar", "aria-labelledby": "similar-title" },
                       el("h3", { id: "similar-title", text: "Similar questions" }));
    questionView.append(section);
    let data;
    try {
      data = await api(`/api/questions/${encodeURIComponent(id)}/similar`, { k: "5" });
    } catch (e) {
      if (e.name === "AbortError") return;
      section.append(el("p", { class: "error", text: e.message }));
      return;
    }
    if (readState().question !== id) return;  // another question is shown by now
    if (!data.hits.length) {
      section.append(el("p", { text: "No similar question in the archive." }));
      return;
    }
    section.append(el("ol", { class: "similar-list" }, data.hits.map((hit) => {
      const target = { ...state, question: hit.id };
      return el("li", {},
        el("a", { href: urlFor(target), class: "similar-link", dataset: { doc: hit.id },
                  onclick: (event) => { event.preventDefault(); go(target); } }, hit.title),
        el("span", { class: "meta" }, hitMeta(hit)));
    })));
  }

  // -- render the state of the URL ---------------------------------------------------------
  async function render() {
    const state = readState();
    hideSuggestions();
    if (document.activeElement !== box) box.value = state.q;
    $("#category-field").value = state.category;
    $("#category-field").disabled = !state.category;
    if (categories === null) await loadCategories();
    if (!state.q || state.question) {  // (a search shows the facets of its hits)
      renderFacet(state, state.category);
      renderTags(state);
    }
    const viewing = Boolean(state.question);
    questionView.hidden = !viewing;
    hitList.hidden = viewing;
    intro.hidden = viewing || Boolean(state.q);
    if (viewing) {
      didYouMean.hidden = true;
      more.hidden = true;
      fromResults = fromResults && Boolean(state.q);
      return showQuestion(state);
    }
    fromResults = false;
    document.title = state.q ? `${state.q} – cqa_search` : "cqa_search";
    if (!state.q) {
      hitList.replaceChildren();
      didYouMean.hidden = true;
      more.hidden = true;
      if (categories) {
        setStatus(`${counted(categories.n_docs, "question")} in ` +
                  `${counted(categories.categories.length, "category")}.`);
      }
      return undefined;
    }
    return search(state);
  }

  // -- events ------------------------------------------------------------------------------
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    hideSuggestions();
    const q = box.value.trim();
    const state = readState();
    if (!q) { box.focus(); return; }
    go({ q, category: state.category, k: K_STEP });
  });

  more.addEventListener("click", () => {
    const state = readState();
    const shown = hitList.children.length;
    go({ ...state, k: Math.min(K_MAX, state.k + K_STEP) }, { replace: true });
    // Keep the reader's place: focus the first new result once it is there.
    const wait = setInterval(() => {
      if (hitList.children.length > shown) {
        clearInterval(wait);
        const link = hitList.children[shown].querySelector(".hit-link");
        if (link) link.focus();
      }
    }, 50);
    setTimeout(() => clearInterval(wait), 10000);
  });

  function hitLinks() {
    const list = suggestBox.hidden ? hitList : suggestBox;
    return Array.from(list.querySelectorAll(list === hitList ? ".hit-link" : "a"));
  }

  // -- suggestions while a question is typed ("asked before?", titles) -----------------
  // Each pause in the typing asks for the 5 most similar questions, and each keystroke
  // for the titles that begin with the words typed (/api/complete); a request still in
  // flight when the next of its kind starts is cancelled, so an older answer never
  // replaces a newer one. The section's data-ms is the time from the last keystroke to
  // the shown suggestions (read by the browser test), data-sent / data-cancelled count
  // requests; the titles' part has its own data-query and data-ms.
  function showParts() {
    suggestBox.hidden = askedPart.hidden && completePart.hidden;
  }

  function hideSuggestions() {
    clearTimeout(suggestTimer);
    if (suggesting) suggesting.abort();
    if (completing) completing.abort();
    suggesting = completing = null;
    askedPart.hidden = completePart.hidden = true;
    suggestBox.hidden = true;
  }

  function openLink(doc, children) {
    const target = { ...readState(), question: doc };
    return el("a", { href: urlFor(target), dataset: { doc },
                     onclick: (event) => { event.preventDefault(); hideSuggestions();
                                           go(target); } }, ...children);
  }

  async function complete(text) {
    if (completing) completing.abort();
    const controller = completing = new AbortController();
    let data;
    try {
      data = await getJSON("/api/complete", { q: text, k: "5" }, controller.signal);
    } catch (e) {
      if (e.name !== "AbortError" && controller === completing) {
        completePart.hidden = true;
        showParts();
      }
      return;
    }
    if (controller !== completing || box.value.trimStart() !== text) return;
    completing = null;
    // the typed part plain, the rest of the title bold (as a search box completes)
    const typed = text.length;
    completeList.replaceChildren(...data.completions.map((c) => {
      const same = c.title.slice(0, typed).toLowerCase() === text.toLowerCase();
      const shown = same ? [c.title.slice(0, typed), el("b", { text: c.title.slice(typed) })]
                         : [c.title];
      return el("li", {}, openLink(c.id, shown),
                el("span", { class: "meta",
                             text: ` · ${c.answers} answer${c.answers === 1 ? "" : "s"}` }));
    }));
    completePart.dataset.query = text;
    completePart.dataset.ms = String(Math.round(performance.now() - lastInput));
    completePart.hidden = !data.completions.length;
    showParts();
  }

  async function suggest(text) {
    if (suggesting) {
      suggesting.abort();
      suggestBox.dataset.cancelled = String(Number(suggestBox.dataset.cancelled || 0) + 1);
    }
    const controller = suggesting = new AbortController();
    suggestBox.dataset.sent = String(Number(suggestBox.dataset.sent || 0) + 1);
    let data;
    try {
      // (typed text is a question, not query syntax: sent as its title, plain text)
      data = await getJSON("/api/search", { title: text, k: "5" }, controller.signal);
    } catch (e) {
      if (e.name !== "AbortError" && controller === suggesting) {
        suggesting = null;
        askedPart.hidden = true;
        showParts();
      }
      return;
    }
    if (controller !== suggesting || box.value.trim() !== text) return;
    suggesting = null;
    suggestList.replaceChildren(...data.hits.map((hit) => el(
      "li", {}, openLink(hit.id, [marked(hit.title_marked)]),
      el("span", { class: "meta", text: hitMeta(hit) }))));
    suggestBox.dataset.query = text;
    suggestBox.dataset.ms = String(Math.round(performance.now() - lastInput));
    askedPart.hidden = !data.hits.length;
    showParts();
  }

  box.addEventListener("input", () => {
    lastInput = performance.now();
    clearTimeout(suggestTimer);
    const text = box.value.trim();
    if (text.length < 3) { hideSuggestions(); return; }
    complete(box.value.trimStart()); // (a space typed last: the word is finished)
    suggestTimer = setTimeout(() => suggest(text), SUGGEST_DELAY_MS);
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement;
    if (event.key === "/" && !typing) {
      event.preventDefault();
      box.focus();
      box.select();
      return;
    }
    if (event.key === "Escape") {
      hideSuggestions();
      box.focus();
      return;
    }
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const links = hitLinks();
    if (!links.length || (hitList.hidden && suggestBox.hidden)) return;
    const at = links.indexOf(target);
    if (target === box && event.key === "ArrowDown") {
      event.preventDefault();
      links[0].focus();
    } else if (at >= 0) {
      event.preventDefault();
      if (event.key === "ArrowDown") links[Math.min(links.length - 1, at + 1)].focus();
      else if (at === 0) box.focus();
      else links[at - 1].focus();
    }
  });

  window.addEventListener("popstate", render);
  render();
})();
