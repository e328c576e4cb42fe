"use strict";
// The module tree: every column of the terminal table, shares drawn as bars, collapsible,
// sortable by any column, filtered by name or type, cut at a depth, searched row by row.

FC.treeColumns = function (m) {
  const c = [
    { key: "type", label: "Type", text: true, fmt: (v) => v },
    { key: "params", label: "Params", fmt: FC.fmt.params, share: true, color: "#55A868" },
    { key: "macs", label: "MACs", fmt: FC.fmt.macs, share: true, color: "#4C72B0" },
    { key: "flops", label: "FLOPs", fmt: FC.fmt.flops, share: true, color: "#8172B3" },
    { key: "bytes_read", label: "Bytes read", fmt: FC.fmt.bytes },
    { key: "bytes_written", label: "Bytes written", fmt: FC.fmt.bytes },
    { key: "output_bytes", label: "Out bytes", fmt: FC.fmt.bytes },
    { key: "input_shapes", label: "Input shape", text: true, fmt: FC.fmt.shapes, unsortable: true },
    { key: "output_shapes", label: "Output shape", text: true, fmt: FC.fmt.shapes, unsortable: true },
  ];
  if (m.timed) {
    c.push({ key: "latency_ms", label: "Latency", fmt: FC.fmt.time, share: true, color: "#C44E52" });
    c.push({ key: "flops_per_second", label: "FLOP/s", fmt: (v) => FC.fmt.rate(v, "FLOP") });
  }
  if (m.backward) {
    c.push({ key: "backward_macs", label: "Bwd MACs", fmt: FC.fmt.macs });
    c.push({ key: "backward_flops", label: "Bwd FLOPs", fmt: FC.fmt.flops });
    if (m.meta.backward_latency_ms !== null) c.push({ key: "backward_latency_ms", label: "Bwd latency", fmt: FC.fmt.time });
  }
  if (m.hardware) {
    c.push({ key: "roofline_ms", label: "Roofline", fmt: FC.fmt.time, share: true, color: "#937860" });
    c.push({ key: "bound", label: "Bound", text: true, fmt: (v) => v || "-" });
    if (m.timed) c.push({ key: "roofline_fraction", label: "Roofline %", fmt: (v) => (v === null || v === undefined ? "-" : (100 * v).toFixed(1) + "%") });
  }
  return c.filter((col) => m.rows[col.key] !== undefined || col.key === "bound");
};

const ROW_LIMIT = 3000; // rows drawn at once; the rest behind a button (a 10,000-node graph has 20,000)

FC.makeTree = function (m, host) {
  const rows = m.rows, n = rows.n;
  const columns = FC.treeColumns(m);
  const maxDepth = rows.depth.reduce((a, b) => Math.max(a, b), 0);
  const state = { depth: Math.min(2, maxDepth), expanded: new Set(), sort: null, asc: false, filter: "",
                  search: "", hits: [], hit: -1, selected: -1, limit: ROW_LIMIT };
  const setDepth = (d) => {
    state.depth = d;
    state.expanded = new Set();
    for (let i = 0; i < n; i++) if (rows.depth[i] < d) state.expanded.add(i);
  };
  setDepth(state.depth);

  // toolbar
  const depthSelect = FC.el("select", { id: "tree-depth", title: "Expand the tree to this depth" },
    Array.from({ length: maxDepth + 1 }, (_, d) => FC.el("option", { value: d, selected: d === state.depth }, String(d))),
    FC.el("option", { value: "all" }, "all"));
  depthSelect.addEventListener("change", () => {
    setDepth(depthSelect.value === "all" ? Infinity : Number(depthSelect.value));
    draw();
  });
  const filterBox = FC.el("input", { type: "search", id: "tree-filter", placeholder: "filter: name or type" });
  filterBox.addEventListener("input", () => { state.filter = filterBox.value.trim().toLowerCase(); draw(); });
  const searchBox = FC.el("input", { type: "search", id: "tree-search", placeholder: "search, Enter for next" });
  const searchCount = FC.el("span", { class: "note", id: "tree-search-count" });
  searchBox.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); find(e.shiftKey ? -1 : 1); } });
  searchBox.addEventListener("input", () => { state.search = ""; find(1); });
  const info = FC.el("span", { class: "note", id: "tree-info" });
  host.appendChild(FC.el("div", { class: "toolbar" },
    FC.el("label", { for: "tree-depth" }, "Depth"), depthSelect, filterBox, searchBox,
    FC.el("button", { class: "small", title: "Previous match", onclick: () => find(-1) }, "\u2191"),
    FC.el("button", { class: "small", title: "Next match", onclick: () => find(1) }, "\u2193"), searchCount,
    FC.el("button", { class: "small", id: "tree-expand-all", onclick: () => { setDepth(Infinity); depthSelect.value = "all"; draw(); } }, "Expand all"),
    FC.el("button", { class: "small", id: "tree-collapse-all", onclick: () => { setDepth(0); depthSelect.value = "0"; draw(); } }, "Collapse all"),
    info));

  // table
  const head = FC.el("tr", null, FC.el("th", { class: "text sortable", "data-key": "name" }, "Module"),
    columns.map((c) => FC.el("th", { class: (c.text ? "text " : "") + (c.unsortable ? "" : "sortable"), "data-key": c.key }, c.label)));
  const body = FC.el("tbody");
  const table = FC.el("table", { class: "grid", id: "tree-table" }, FC.el("thead", null, head), body);
  host.appendChild(FC.el("div", { class: "scroll", id: "tree-scroll" }, table));

  head.addEventListener("click", (e) => {
    const th = e.target.closest("th.sortable");
    if (!th) return;
    const key = th.dataset.key;
    if (state.sort === key) state.asc = !state.asc;
    else { state.sort = key; state.asc = key === "name"; }
    for (const h of head.children) h.classList.toggle("sorted", h.dataset.key === state.sort);
    th.classList.toggle("asc", state.asc);
    draw();
  });
  body.addEventListener("click", (e) => {
    const tr = e.target.closest("tr[data-row]");
    if (!tr) {
      if (e.target.closest("#tree-more")) { state.limit += ROW_LIMIT; draw(); }
      return;
    }
    const i = Number(tr.dataset.row);
    if (e.target.closest(".caret")) {
      if (m.children[i].length) {
        if (state.expanded.has(i)) state.expanded.delete(i); else state.expanded.add(i);
        draw();
      }
      return;
    }
    select(i);
  });

  // which rows match the filter, and their ancestors
  function filtered() {
    if (!state.filter) return null;
    const keep = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      if (rows.name[i].toLowerCase().includes(state.filter) || String(rows.type[i]).toLowerCase().includes(state.filter)) {
        keep[i] = 2; // a match
        for (let p = rows.parent[i]; p >= 0 && !keep[p]; p = rows.parent[p]) keep[p] = 1;
      }
    }
    return keep;
  }
  function sortKey(i) {
    if (state.sort === "name") return m.label(i).toLowerCase();
    const v = rows[state.sort][i];
    return v === null || v === undefined ? -Infinity : v;
  }
  function kids(i) {
    const list = m.children[i];
    if (!state.sort) return list;
    const sign = state.asc ? 1 : -1;
    return list.slice().sort((a, b) => {
      const x = sortKey(a), y = sortKey(b);
      return x < y ? -sign : x > y ? sign : a - b;
    });
  }
  function visible(keep) {
    const out = [];
    if (!n) return out;
    const stack = [0];
    while (stack.length) {
      const i = stack.pop();
      if (keep && !keep[i]) continue;
      out.push(i);
      if (state.expanded.has(i) || (keep && keep[i] === 1)) {
        const list = kids(i);
        for (let k = list.length - 1; k >= 0; k--) stack.push(list[k]);
      }
    }
    return out;
  }
  function cell(c, i) {
    const v = rows[c.key] ? rows[c.key][i] : null;
    const attrs = { class: c.text ? "text" : null };
    if (!c.text) {
      attrs["data-v"] = v === null || v === undefined ? "" : String(v);
      if (Number.isInteger(v)) attrs.title = v.toLocaleString("en-US");
    }
    if (c.share && typeof v === "number") {
      const total = rows[c.key][0];
      if (total) attrs.style = FC.barStyle(v / total, c.color);
      if (total) attrs.title = (attrs.title ? attrs.title + "  " : "") + FC.fmt.percent(v, total) + " of the model";
    }
    const td = FC.el("td", attrs, c.fmt(v));
    td.dataset.col = c.key;
    return td;
  }
  function draw() {
    FC.timed("tree", () => {
      const keep = filtered();
      const list = visible(keep);
      const frag = document.createDocumentFragment();
      const hits = new Set(state.hit >= 0 ? [state.hits[state.hit]] : []);
      for (const i of list.slice(0, state.limit)) {
        const open = state.expanded.has(i) || (keep !== null && keep[i] === 1);
        const caret = FC.el("span", { class: "caret" + (m.children[i].length ? "" : " leaf") },
          m.children[i].length ? (open ? "\u25be" : "\u25b8") : "");
        const name = FC.el("td", { class: "text name", title: m.path[i] || rows.name[0], style: { paddingLeft: 4 + 14 * rows.depth[i] + "px" } },
          caret, m.label(i), rows.counted_by[i] === "covered" ? " *" : "");
        const tr = FC.el("tr", { "data-row": i, class: [i === state.selected ? "selected" : "", hits.has(i) ? "hit" : ""].join(" ").trim() || null },
          name, columns.map((c) => cell(c, i)));
        frag.appendChild(tr);
      }
      if (list.length > state.limit) {
        frag.appendChild(FC.el("tr", null, FC.el("td", { class: "text", colspan: columns.length + 1 },
          FC.el("button", { class: "small", id: "tree-more" }, `${(list.length - state.limit).toLocaleString("en-US")} more rows: show`))));
      }
      body.replaceChildren(frag);
      info.textContent = `${Math.min(list.length, state.limit).toLocaleString("en-US")} of ${n.toLocaleString("en-US")} rows`;
    });
  }
  function select(i) {
    state.selected = i;
    for (const tr of body.querySelectorAll("tr.selected")) tr.classList.remove("selected");
    const tr = body.querySelector(`tr[data-row="${i}"]`);
    if (tr) tr.classList.add("selected");
    FC.rowPanel(m, i);
  }
  function open(i) {
    for (let p = rows.parent[i]; p >= 0; p = rows.parent[p]) state.expanded.add(p);
    if (state.filter) { state.filter = ""; filterBox.value = ""; }
    const list = visible(null);
    const at = list.indexOf(i);
    if (at >= state.limit) state.limit = at + 1;
  }
  function find(step) {
    const text = searchBox.value.trim().toLowerCase();
    if (!text) { state.hits = []; state.hit = -1; searchCount.textContent = ""; draw(); return; }
    if (text !== state.search) {
      state.search = text;
      state.hits = [];
      for (let i = 0; i < n; i++) {
        if (rows.name[i].toLowerCase().includes(text) || String(rows.type[i]).toLowerCase().includes(text)) state.hits.push(i);
      }
      state.hit = -1;
    }
    if (!state.hits.length) { searchCount.textContent = "no match"; state.hit = -1; draw(); return; }
    state.hit = (state.hit + step + state.hits.length) % state.hits.length;
    const i = state.hits[state.hit];
    searchCount.textContent = `${state.hit + 1} of ${state.hits.length}`;
    open(i);
    draw();
    const tr = body.querySelector(`tr[data-row="${i}"]`);
    if (tr) tr.scrollIntoView({ block: "center" });
  }
  draw();
  FC.treeView = {
    state,
    draw,
    // show the row of a module path or op name, opened and selected
    reveal(name) {
      let i = m.rowByPath.get(name);
      if (i === undefined) {
        const op = m.opByName.get(name);
        if (op !== undefined) i = m.rowByPath.get(m.ops.scope[op]);
      }
      if (i === undefined) return false;
      open(i);
      state.selected = i;
      draw();
      const tr = body.querySelector(`tr[data-row="${i}"]`);
      if (tr) tr.scrollIntoView({ block: "center" });
      const op = m.opByName.get(name);
      if (op !== undefined) FC.opPanel(m, op); else FC.rowPanel(m, i);
      return true;
    },
  };
};
