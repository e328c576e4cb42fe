"use strict";
// The report as the views read it: rows (the module tree) and op records, indexed by name, and
// the panels that show one row or one op. Built once from the embedded data.

FC.buildModel = function (data) {
  const rows = FC.columns(data.rows), ops = FC.columns(data.ops);
  const n = rows.n;
  const children = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) if (rows.parent[i] >= 0) children[rows.parent[i]].push(i);
  // a row's path in the model ('' for the root, which the JSON report names after the model)
  const path = rows.name.slice();
  if (n) path[0] = "";
  const rowByPath = new Map();
  path.forEach((p, i) => rowByPath.set(p, i));
  const opByName = new Map();
  for (let i = 0; i < ops.n; i++) {
    if (!opByName.has(ops.name[i]) || ops.phase[i] === "forward") opByName.set(ops.name[i], i);
  }
  const meta = data.meta;
  return {
    data, meta, rows, ops, children, path, rowByPath, opByName,
    timed: meta.totals.latency_ms !== null && meta.totals.latency_ms !== undefined,
    backward: !!meta.backward,
    hardware: data.hardware,
    value(column, i) { const c = rows[column]; return c ? c[i] : null; },
    opValue(column, i) { const c = ops[column]; return c ? c[i] : null; },
    // the op records under a module (its scope or deeper), forward first
    opsUnder(rowIndex) {
      const p = path[rowIndex], out = [];
      for (let i = 0; i < ops.n; i++) {
        const s = ops.scope[i];
        if (p === "" || s === p || s.startsWith(p + ".")) out.push(i);
      }
      return out;
    },
    label(i) {
      if (i === 0) return rows.name[0];
      // as the terminal table: the last part of the dotted path, then of 'scope/op'
      const last = rows.name[i].slice(rows.name[i].lastIndexOf(".") + 1);
      return last.slice(last.lastIndexOf("/") + 1);
    },
  };
};

function valueTable(names, shapes, dtypes) {
  const body = [];
  const count = Math.max((shapes || []).length, (names || []).length);
  for (let k = 0; k < count; k++) {
    body.push(FC.el("tr", null,
      FC.el("td", { text: names && names[k] !== undefined ? (names[k] === null ? "(absent)" : names[k]) : "#" + k }),
      FC.el("td", { text: shapes ? FC.fmt.shape(shapes[k]) : "" }),
      FC.el("td", { text: dtypes && dtypes[k] ? dtypes[k] : "" })));
  }
  return FC.el("table", null, body);
}

// the panel of one op record: shapes, dtypes, attributes and costs
FC.opPanel = function (m, i) {
  const o = m.ops, t = m.meta.totals;
  const costs = [
    ["op", o.op[i]], ["scope", o.scope[i] || "(model)"], ["phase", o.phase[i]],
    ["counted", o.counted[i] ? "yes" : "no (outside the convention's total)"],
    ["MACs", FC.fmt.macs(o.macs[i]) + "  (" + FC.fmt.count(o.macs[i]) + ")"],
    ["FLOPs", FC.fmt.flops(o.flops[i]) + "  (" + FC.fmt.count(o.flops[i]) + ")"],
    ["MACs share", FC.fmt.percent(o.macs[i], t.macs)],
    ["bytes read", FC.fmt.bytes(o.bytes_read[i])], ["bytes written", FC.fmt.bytes(o.bytes_written[i])],
    ["params read", FC.fmt.params(o.params[i])], ["param bytes", FC.fmt.bytes(o.param_bytes[i])],
    m.timed ? ["latency", FC.fmt.time(m.opValue("latency_ms", i))] : null,
    m.timed ? ["started at", FC.fmt.time(m.opValue("start_ms", i))] : null,
    m.hardware ? ["roofline", FC.fmt.time(m.opValue("roofline_ms", i))] : null,
    m.hardware ? ["bound", m.opValue("bound", i) || "-"] : null,
    m.opValue("mac_dtype", i) ? ["MACs run in", m.opValue("mac_dtype", i)] : null,
    m.opValue("source", i) ? ["model file node", m.opValue("source", i)] : null,
  ];
  const attrs = m.opValue("attrs", i);
  const actions = FC.el("div", { class: "actions" },
    FC.el("button", { class: "small", onclick: () => FC.reveal.tree(o.name[i]) }, "Show in tree"),
    m.graph && o.phase[i] === "forward" ? FC.el("button", { class: "small", onclick: () => FC.reveal.graph(i) }, "Show in graph") : null);
  FC.panel.show(o.name[i], actions, FC.kvTable(costs),
    FC.el("h3", { text: "inputs" }), valueTable(m.opValue("inputs", i), o.input_shapes[i], o.input_dtypes[i]),
    FC.el("h3", { text: "outputs" }), valueTable(m.opValue("outputs", i), o.output_shapes[i], o.output_dtypes[i]),
    attrs && Object.keys(attrs).length ? FC.el("h3", { text: "attributes" }) : null,
    attrs && Object.keys(attrs).length ? FC.el("pre", { text: JSON.stringify(attrs, null, 1) }) : null);
  document.getElementById("panel").dataset.op = String(i);
};

// the panel of one module row: its numbers and the ops it ran
FC.rowPanel = function (m, r) {
  const rows = m.rows, t = m.meta.totals;
  const opIndex = m.opByName.get(rows.name[r]);
  if (rows.kind[r] === "op" && opIndex !== undefined) return FC.opPanel(m, opIndex);
  const pairs = [
    ["type", rows.type[r]], ["kind", rows.kind[r]], ["counted by", rows.counted_by[r]],
    ["params", FC.fmt.params(rows.params[r]) + "  (" + FC.fmt.count(rows.params[r]) + ")"],
    ["own params", FC.fmt.params(rows.params_own[r])],
    ["MACs", FC.fmt.macs(rows.macs[r]) + "  (" + FC.fmt.percent(rows.macs[r], t.macs) + ")"],
    ["FLOPs", FC.fmt.flops(rows.flops[r]) + "  (" + FC.fmt.percent(rows.flops[r], t.flops) + ")"],
    ["bytes read", FC.fmt.bytes(rows.bytes_read[r])], ["bytes written", FC.fmt.bytes(rows.bytes_written[r])],
    ["output bytes", FC.fmt.bytes(rows.output_bytes[r])],
    ["input shapes", FC.fmt.shapes(rows.input_shapes[r])], ["output shapes", FC.fmt.shapes(rows.output_shapes[r])],
    m.timed ? ["latency", FC.fmt.time(m.value("latency_ms", r))] : null,
    m.hardware ? ["roofline", FC.fmt.time(m.value("roofline_ms", r))] : null,
    m.hardware ? ["bound", m.value("bound", r) || "-"] : null,
  ];
  const ops = m.opsUnder(r);
  const shown = ops.slice(0, 500);
  const list = FC.el("table", { class: "ops-list" }, shown.map((i) => FC.el("tr", {
    class: "oplink", "data-op": i, onclick: () => FC.opPanel(m, i),
  }, FC.el("td", { text: m.ops.op[i] }), FC.el("td", { text: m.ops.name[i] }),
  FC.el("td", { text: FC.fmt.macs(m.ops.macs[i]) }))));
  const actions = FC.el("div", { class: "actions" },
    m.graph && r !== 0 ? FC.el("button", { class: "small", onclick: () => FC.reveal.graphGroup(m.path[r]) }, "Show in graph") : null);
  FC.panel.show(r === 0 ? rows.name[0] : m.path[r], actions, FC.kvTable(pairs),
    FC.el("h3", { text: `ops (${ops.length.toLocaleString("en-US")}${ops.length > shown.length ? ", the first " + shown.length + " listed" : ""})` }),
    list);
  document.getElementById("panel").dataset.row = String(r);
};

// moving between views: the tree and the graph register how they show a name
FC.reveal = {
  tree(name) {
    FC.showTab("tree");
    if (FC.treeView) FC.treeView.reveal(name);
  },
  graph(opIndex) {
    FC.showTab("graph");
    if (FC.graphView) FC.graphView.revealOp(opIndex);
  },
  graphGroup(path) {
    FC.showTab("graph");
    if (FC.graphView) FC.graphView.revealGroup(path);
  },
};
