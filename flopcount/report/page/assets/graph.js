"use strict";
// The op graph: the forward op records (each names the values it reads and makes, so an edge
// joins the op that makes a value to the ops that read it), folded into their modules. Modules
// start collapsed, as one node each, and open on a click: a 10,000-op decoder first draws a few
// dozen nodes. A module of more than CHUNK_OVER direct parts is cut into runs of CHUNK in
// execution order, so no level ever draws thousands of nodes at once.

const CHUNK_OVER = 150, CHUNK = 100, FIRST_VIEW = 120;

function buildHierarchy(m) {
  const o = m.ops, groups = [], byPath = new Map();
  const group = (path) => {
    let g = byPath.get(path);
    if (g !== undefined) return g;
    const parent = path === "" ? -1 : group(path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "");
    g = groups.length;
    const row = m.rowByPath.get(path);
    groups.push({ path, row: row === undefined ? -1 : row, parent, items: [], single: -1, count: 0, chunk: false,
                  depth: parent < 0 ? 0 : groups[parent].depth + 1, label: path === "" ? m.rows.name[0] : path.slice(path.lastIndexOf(".") + 1) });
    byPath.set(path, g);
    if (parent >= 0) groups[parent].items.push({ g });
    return g;
  };
  group("");
  const ops = [], opGroup = new Map();
  for (let i = 0; i < o.n; i++) {
    if (o.phase[i] !== "forward" || !o.outputs || !o.outputs[i] || !o.outputs[i].length) continue;
    const g = group(o.scope[i]);
    groups[g].items.push({ o: i });
    opGroup.set(i, g);
    ops.push(i);
    for (let a = g; a >= 0; a = groups[a].parent) {
      groups[a].count += 1;
      groups[a].single = groups[a].count === 1 ? i : -1;
    }
  }
  // long lists of parts become runs of CHUNK parts, in execution order
  const chunkify = (g) => {
    const items = groups[g].items;
    if (items.length <= CHUNK_OVER) return;
    const runs = [];
    for (let s = 0; s < items.length; s += CHUNK) {
      const c = groups.length;
      const part = items.slice(s, s + CHUNK);
      groups.push({ path: `${groups[g].path}[${s + 1}-${s + part.length}]`, row: -1, parent: g, items: part, single: -1,
                    count: 0, chunk: true, depth: groups[g].depth + 1, label: `parts ${s + 1}-${s + part.length} of ${items.length}` });
      for (const it of part) {
        if (it.g !== undefined) groups[it.g].parent = c;
        else opGroup.set(it.o, c);
      }
      runs.push({ g: c });
    }
    groups[g].items = runs;
    for (const r of runs) chunkify(r.g);
  };
  for (let g = 0; g < groups.length; g++) if (!groups[g].chunk) chunkify(g);
  for (let g = groups.length - 1; g >= 0; g--) {  // a run's runs come after it
    if (groups[g].chunk) groups[g].count = groups[g].items.reduce((s, it) => s + (it.o !== undefined ? 1 : groups[it.g].count), 0);
  }
  // the edges between ops, by value
  const producer = new Map();
  for (const i of ops) for (const v of o.outputs[i]) producer.set(v, i);
  const from = [], to = [];
  for (const i of ops) {
    const seen = new Set();
    for (const v of o.inputs[i]) {
      const p = v === null ? undefined : producer.get(v);
      if (p !== undefined && p !== i && !seen.has(p)) { seen.add(p); from.push(p); to.push(i); }
    }
  }
  const opOrder = new Map();
  ops.forEach((i, k) => opOrder.set(i, k));
  return { groups, byPath, ops, opGroup, from: Int32Array.from(from), to: Int32Array.from(to), opOrder };
}

FC.makeGraph = function (m, host) {
  const start = performance.now();
  const h = buildHierarchy(m);
  const { groups } = h;
  const o = m.ops;
  const expanded = new Set([0]);
  const metrics = [["macs", "MACs"], ["flops", "FLOPs"], ["bytes", "bytes read + written"], ["params", "params"]];
  if (m.timed) metrics.push(["latency_ms", "latency"]);
  if (m.hardware) metrics.push(["roofline_ms", "roofline time"], ["bound", "bound"]);
  const state = { metric: "macs", selected: null, view: { x: 20, y: 20, k: 1 }, layout: null, items: [] };

  // what is drawn: the parts of the expanded modules; a collapsed module is one node
  function visibleItems() {
    const items = [], groupItem = new Int32Array(groups.length).fill(-1);
    const walk = (g) => {
      for (const it of groups[g].items) {
        if (it.o !== undefined) { items.push({ op: it.o, group: -1 }); continue; }
        const c = groups[it.g];
        if (!c.count) continue;
        if (c.single >= 0 && !c.chunk) { items.push({ op: c.single, group: it.g }); groupItem[it.g] = items.length - 1; }
        else if (expanded.has(it.g)) walk(it.g);
        else { items.push({ op: -1, group: it.g }); groupItem[it.g] = items.length - 1; }
      }
    };
    walk(0);
    return { items, groupItem };
  }
  function expandFirstLevels() {
    // open whole levels while the drawing stays small
    for (;;) {
      const { items } = visibleItems();
      const closed = items.filter((it) => it.op < 0).map((it) => it.group);
      if (!closed.length) return;
      const after = items.length - closed.length + closed.reduce((s, g) => s + groups[g].items.length, 0);
      if (after > FIRST_VIEW && items.length > 1) return;
      for (const g of closed) expanded.add(g);
    }
  }
  function itemValue(it, key) {
    const row = it.op >= 0 ? -1 : groups[it.group].row;
    if (it.op < 0 && row < 0) return null; // a run of parts has no row of its own
    const col = (name) => (it.op >= 0 ? (o[name] ? o[name][it.op] : null) : (m.rows[name] ? m.rows[name][row] : null));
    if (key === "bytes") return col("bytes_read") + col("bytes_written");
    return col(key);
  }
  function totalOf(key) {
    if (key === "bytes") return m.rows.bytes_read[0] + m.rows.bytes_written[0];
    return m.rows[key] ? m.rows[key][0] : null;
  }
  function labels(it) {
    if (it.op >= 0) {
      const shape = o.output_shapes[it.op] && o.output_shapes[it.op].length ? FC.fmt.shape(o.output_shapes[it.op][0]) : "";
      const name = it.group >= 0 ? groups[it.group].label + ": " + o.op[it.op] : o.op[it.op];
      return [name, shape];
    }
    const g = groups[it.group];
    const type = g.row >= 0 ? m.rows.type[g.row] : "";
    return [g.label, (type ? type + " \u00b7 " : "") + g.count.toLocaleString("en-US") + " ops"];
  }

  // toolbar and canvas
  const metricSelect = FC.el("select", { id: "graph-metric" }, metrics.map(([k, label]) => FC.el("option", { value: k }, label)));
  metricSelect.addEventListener("change", () => { state.metric = metricSelect.value; paint(); });
  const info = FC.el("span", { class: "note", id: "graph-info" });
  const legend = FC.el("span", { class: "legend", id: "graph-legend" });
  host.appendChild(FC.el("div", { class: "toolbar" },
    FC.el("label", { for: "graph-metric" }, "Colour by"), metricSelect,
    FC.el("button", { class: "small", id: "graph-expand-level", onclick: () => expandLevel() }, "Open one level"),
    FC.el("button", { class: "small", id: "graph-collapse-all", onclick: () => { expanded.clear(); expanded.add(0); relayout(); fit(); } }, "Collapse all"),
    FC.el("button", { class: "small", id: "graph-fit", onclick: () => fit() }, "Fit"), legend, info));
  const svg = FC.svg("svg", { id: "graph-svg" });
  const viewport = FC.svg("g", { class: "viewport" });
  svg.appendChild(viewport);
  const canvasHost = FC.el("div", { class: "graph-host" }, svg);
  host.appendChild(canvasHost);

  function relayout() {
    const { items, groupItem } = visibleItems();
    const itemOf = (op) => {
      for (let g = h.opGroup.get(op); g >= 0; g = groups[g].parent) {
        if (groupItem[g] >= 0) return groupItem[g];
      }
      return -1;
    };
    const repOf = new Map();
    items.forEach((it, k) => { if (it.op >= 0 && it.group < 0) repOf.set(it.op, k); });
    for (const i of h.ops) if (!repOf.has(i)) repOf.set(i, itemOf(i));
    const firstOrder = new Float64Array(items.length).fill(Infinity);
    for (const i of h.ops) {
      const k = repOf.get(i);
      if (k >= 0) firstOrder[k] = Math.min(firstOrder[k], h.opOrder.get(i));
    }
    const seen = new Set(), edges = [];
    const V = items.length;
    for (let e = 0; e < h.from.length; e++) {
      const a = repOf.get(h.from[e]), b = repOf.get(h.to[e]);
      if (a === undefined || b === undefined || a < 0 || b < 0 || a === b) continue;
      const key = a * V + b;
      if (seen.has(key)) continue;
      seen.add(key);
      edges.push([a, b]);
    }
    const nodes = items.map((it, k) => {
      const [a, b] = labels(it);
      const w = Math.min(260, Math.max(74, 16 + 6.4 * Math.max(a.length, b.length * 0.9)));
      return { w, h: it.op < 0 ? 38 : 34, order: firstOrder[k] };
    });
    state.items = items;
    state.nodes = nodes;
    state.edges = edges;
    state.layout = FC.layered(nodes, edges);
    draw();
  }

  function clustersOf(items, layout) {
    // the box of every expanded module around the nodes drawn inside it
    const box = new Map();
    items.forEach((it, k) => {
      let g = it.op >= 0 && it.group < 0 ? h.opGroup.get(it.op) : groups[it.group].parent;
      const x0 = layout.x[k] - state.nodes[k].w / 2, x1 = layout.x[k] + state.nodes[k].w / 2;
      const y0 = layout.y[k] - state.nodes[k].h / 2, y1 = layout.y[k] + state.nodes[k].h / 2;
      for (; g > 0; g = groups[g].parent) {
        const b = box.get(g);
        if (!b) box.set(g, [x0, y0, x1, y1]);
        else { b[0] = Math.min(b[0], x0); b[1] = Math.min(b[1], y0); b[2] = Math.max(b[2], x1); b[3] = Math.max(b[3], y1); }
      }
    });
    return box;
  }

  function draw() {
    const { items, layout } = state;
    const clusterLayer = FC.svg("g"), edgeLayer = FC.svg("g"), nodeLayer = FC.svg("g");
    for (const [g, b] of clustersOf(items, layout)) {
      const pad = 6 + 3 * Math.max(0, 6 - groups[g].depth);
      clusterLayer.appendChild(FC.svg("g", { class: "gcluster", "data-group": g },
        FC.svg("rect", { x: b[0] - pad, y: b[1] - pad - 10, width: b[2] - b[0] + 2 * pad, height: b[3] - b[1] + 2 * pad + 10, rx: 6 }),
        FC.svg("text", { x: b[0] - pad + 4, y: b[1] - pad - 1, text: groups[g].label + " \u2212", "data-collapse": g })));
    }
    for (const pts of layout.paths) edgeLayer.appendChild(FC.svg("path", { class: "gedge", d: FC.edgePath(pts), "marker-end": "url(#arrow)" }));
    items.forEach((it, k) => {
      const [a, b] = labels(it);
      const w = state.nodes[k].w, hh = state.nodes[k].h;
      const x = layout.x[k] - w / 2, y = layout.y[k] - hh / 2;
      const node = FC.svg("g", { class: "gnode " + (it.op >= 0 ? "op" : "group"), transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
                                "data-item": k, "data-op": it.op >= 0 ? it.op : null, "data-group": it.group >= 0 ? it.group : null },
        FC.svg("rect", { class: "box", width: w, height: hh, rx: it.op >= 0 ? 4 : 8 }),
        FC.svg("rect", { class: "share", x: 0, y: hh - 3, width: 0, height: 3, fill: "#1f4e8c" }),
        FC.svg("text", { x: 8, y: 14, text: a.length > 38 ? a.slice(0, 37) + "\u2026" : a }),
        FC.svg("text", { class: "sub", x: 8, y: 27, text: b.length > 42 ? b.slice(0, 41) + "\u2026" : b }));
      if (it.op < 0) {
        node.appendChild(FC.svg("g", { class: "toggle", "data-expand": it.group, transform: `translate(${w - 10},10)` },
          FC.svg("circle", { r: 7 }), FC.svg("text", { y: 4, text: "+" })));
      }
      nodeLayer.appendChild(node);
    });
    const defs = FC.svg("defs", null, FC.svg("marker", { id: "arrow", viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" },
      FC.svg("path", { d: "M0,0L8,4L0,8z", fill: "#8c959f" })));
    viewport.replaceChildren(defs, clusterLayer, edgeLayer, nodeLayer);
    info.textContent = `${items.length.toLocaleString("en-US")} nodes, ${state.edges.length.toLocaleString("en-US")} edges drawn; ${h.ops.length.toLocaleString("en-US")} ops in all`;
    paint();
    if (state.selected) mark(state.selected);
  }

  function paint() {
    const key = state.metric, items = state.items;
    const values = items.map((it) => itemValue(it, key));
    const total = key === "bound" ? null : totalOf(key);
    const color = key === "bound" ? FC.boundColor : FC.heat(values.filter((v) => typeof v === "number"));
    const nodes = viewport.querySelectorAll(".gnode");
    nodes.forEach((node) => {
      const k = Number(node.dataset.item), v = values[k];
      node.querySelector("rect.box").setAttribute("fill", v === null || v === undefined ? "#ffffff" : color(v));
      const share = total && typeof v === "number" ? Math.max(0, Math.min(1, v / total)) : 0;
      node.querySelector("rect.share").setAttribute("width", (share * state.nodes[k].w).toFixed(1));
      node.querySelector("text").setAttribute("fill", key !== "bound" && typeof v === "number" && color.dark && color.dark(v) ? "#fff" : "#1f2328");
    });
    legend.replaceChildren(...(key === "bound"
      ? [FC.el("span", null, FC.el("i", { style: { background: FC.boundColor("compute") } }), "compute-bound"),
         FC.el("span", null, FC.el("i", { style: { background: FC.boundColor("memory") } }), "memory-bound")]
      : [FC.el("span", null, "light \u2192 dark: more " + metrics.find((x) => x[0] === key)[1] + " (log scale); bar: share of the model")]));
  }

  // pan and zoom
  function applyView() { viewport.setAttribute("transform", `translate(${state.view.x},${state.view.y}) scale(${state.view.k})`); }
  function fit() {
    const L = state.layout, W = canvasHost.clientWidth || 800, H = canvasHost.clientHeight || 600;
    const k = Math.max(0.05, Math.min(1.2, (W - 40) / (L.width + 20), L.height > 0 ? Math.max((H - 40) / (L.height + 20), 0.35) : 1));
    state.view = { k, x: (W - L.width * k) / 2, y: 24 };
    applyView();
  }
  function centerOn(k) {
    const W = canvasHost.clientWidth || 800, H = canvasHost.clientHeight || 600, L = state.layout;
    state.view.k = Math.max(state.view.k, 0.6);
    state.view.x = W / 2 - L.x[k] * state.view.k;
    state.view.y = H / 2 - L.y[k] * state.view.k;
    applyView();
  }
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), px = e.clientX - r.left, py = e.clientY - r.top;
    const k = Math.max(0.02, Math.min(4, state.view.k * Math.exp(-e.deltaY * 0.0015)));
    state.view.x = px - (px - state.view.x) * (k / state.view.k);
    state.view.y = py - (py - state.view.y) * (k / state.view.k);
    state.view.k = k;
    applyView();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { if (!e.target.closest(".gnode, .gcluster text")) { drag = [e.clientX, e.clientY, state.view.x, state.view.y]; svg.classList.add("dragging"); } });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    state.view.x = drag[2] + e.clientX - drag[0];
    state.view.y = drag[3] + e.clientY - drag[1];
    applyView();
  });
  window.addEventListener("mouseup", () => { drag = null; svg.classList.remove("dragging"); });

  // clicks: the + opens a module, a cluster's label closes it, a node shows its panel
  svg.addEventListener("click", (e) => {
    const toggle = e.target.closest("[data-expand]");
    if (toggle) { openGroup(Number(toggle.dataset.expand)); return; }
    const close = e.target.closest("[data-collapse]");
    if (close) { closeGroup(Number(close.dataset.collapse)); return; }
    const node = e.target.closest(".gnode");
    if (node) select(Number(node.dataset.item));
  });
  svg.addEventListener("dblclick", (e) => {
    const node = e.target.closest(".gnode.group");
    if (node) openGroup(Number(node.dataset.group));
  });
  svg.addEventListener("mousemove", (e) => {
    const node = e.target.closest(".gnode");
    if (!node) { FC.tooltip.hide(); return; }
    const it = state.items[Number(node.dataset.item)];
    const v = itemValue(it, state.metric);
    const title = it.op >= 0 ? o.name[it.op] : groups[it.group].path || m.rows.name[0];
    const label = metrics.find((x) => x[0] === state.metric)[1];
    const shown = state.metric === "bound" ? (v || "-") : state.metric === "latency_ms" || state.metric === "roofline_ms" ? FC.fmt.time(v)
      : state.metric === "params" ? FC.fmt.params(v) : state.metric === "macs" ? FC.fmt.macs(v) : state.metric === "flops" ? FC.fmt.flops(v) : FC.fmt.bytes(v);
    FC.tooltip.show(`${title}\n${label}: ${shown}`, e);
  });
  svg.addEventListener("mouseleave", () => FC.tooltip.hide());

  function openGroup(g) {
    expanded.add(g);
    relayout();
    const k = state.items.findIndex((it) => it.op >= 0 ? groupChain(it).includes(g) : groups[it.group].parent === g || groupAncestors(it.group).includes(g));
    if (k >= 0) centerOn(k);
  }
  function closeGroup(g) {
    expanded.delete(g);
    for (const x of Array.from(expanded)) if (groupAncestors(x).includes(g)) expanded.delete(x);
    relayout();
    const k = state.items.findIndex((it) => it.group === g);
    if (k >= 0) centerOn(k);
  }
  function groupAncestors(g) {
    const out = [];
    for (let a = groups[g].parent; a >= 0; a = groups[a].parent) out.push(a);
    return out;
  }
  function groupChain(it) {
    const out = [];
    for (let a = it.group >= 0 ? groups[it.group].parent : h.opGroup.get(it.op); a >= 0; a = groups[a].parent) out.push(a);
    return out;
  }
  function expandLevel() {
    for (const it of state.items) if (it.op < 0) expanded.add(it.group);
    relayout();
  }
  function mark(sel) {
    viewport.querySelectorAll(".gnode.selected").forEach((n) => n.classList.remove("selected"));
    const k = state.items.findIndex((it) => (sel.op >= 0 ? it.op === sel.op : it.group === sel.group && it.op < 0));
    if (k < 0) return -1;
    const node = viewport.querySelector(`.gnode[data-item="${k}"]`);
    if (node) node.classList.add("selected");
    return k;
  }
  function select(k) {
    const it = state.items[k];
    state.selected = { op: it.op, group: it.op >= 0 ? -1 : it.group };
    mark(state.selected);
    if (it.op >= 0) { FC.opPanel(m, it.op); return; }
    const g = groups[it.group];
    if (g.row >= 0) FC.rowPanel(m, g.row);
    else FC.panel.show(g.label, FC.el("p", { text: `${g.count} ops of ${groups[g.parent].path || m.rows.name[0]}, in execution order` }));
    const actions = document.querySelector("#panel .actions") || document.getElementById("panel");
    actions.appendChild(FC.el("button", { class: "small", id: "graph-open-selected", onclick: () => openGroup(it.group) }, "Open in graph"));
  }

  expandFirstLevels();
  relayout();
  fit();
  FC.timings.graphFirstDraw = performance.now() - start;
  requestAnimationFrame(() => requestAnimationFrame(() => { FC.timings.graphFirstPaint = performance.now() - start; }));

  FC.graphView = {
    state, groups, hierarchy: h,
    shown() { if (!state.view.k) fit(); },
    revealOp(i) {
      for (let g = h.opGroup.get(i); g >= 0; g = groups[g].parent) expanded.add(g);
      // a module of one op is drawn as that op; nothing else to open
      relayout();
      const k = state.items.findIndex((it) => it.op === i);
      if (k < 0) return false;
      select(k);
      centerOn(k);
      return true;
    },
    revealGroup(path) {
      const g = h.byPath.get(path);
      if (g === undefined) return false;
      for (let a = groups[g].parent; a >= 0; a = groups[a].parent) expanded.add(a);
      relayout();
      const k = state.items.findIndex((it) => it.group === g || (it.op >= 0 && groups[g].single === it.op));
      if (k < 0) return false;
      select(k);
      centerOn(k);
      return true;
    },
    open: openGroup,
    close: closeGroup,
  };
};
