"use strict";
// Starting the page: read the embedded data, then the tabs of a report, a diff or a document.

function card(label, value, title) {
  return FC.el("div", { class: "card", title: title || null }, FC.el("div", { class: "k", text: label }), FC.el("div", { class: "v", text: value }));
}

function reportSummary(m) {
  const t = m.meta.totals, meta = m.meta;
  const cards = [
    card("Params", FC.fmt.params(t.params), FC.fmt.count(t.params)),
    card("MACs", FC.fmt.macs(t.macs), FC.fmt.count(t.macs)),
    card("FLOPs", FC.fmt.flops(t.flops), FC.fmt.count(t.flops)),
    card("Bytes moved", FC.fmt.bytes(m.rows.bytes_read[0] + m.rows.bytes_written[0])),
  ];
  if (meta.memory && meta.memory.peak_bytes !== undefined) cards.push(card("Peak memory", FC.fmt.bytes(meta.memory.peak_bytes)));
  if (m.timed) cards.push(card("Latency", FC.fmt.time(meta.latency_ms)));
  if (m.hardware) cards.push(card("Roofline", FC.fmt.time(m.rows.roofline_ms ? m.rows.roofline_ms[0] : null), m.hardware.title));
  const what = [meta.mode, meta.convention, meta.device, meta.dtype, m.hardware ? m.hardware.title : null,
    `${m.rows.n.toLocaleString("en-US")} rows, ${m.ops.n.toLocaleString("en-US")} ops`].filter((x) => x);
  const warn = (meta.warnings || []).map((w) => FC.el("div", { class: "warn", text: w }));
  return [FC.el("div", { class: "cards" }, cards), FC.el("div", { class: "note", text: what.join(" \u00b7 ") }), warn];
}

function bootReport(data) {
  const m = FC.buildModel(data);
  FC.model = m;
  m.graph = m.ops.outputs !== undefined && m.ops.n > 0;
  document.getElementById("summary").replaceChildren(...reportSummary(m).flat());
  FC.addTab("tree", "Modules", (host) => FC.makeTree(m, host));
  FC.addTab("graph", "Graph", (host) => FC.makeGraph(m, host),
    m.graph ? null : "No op graph: this report's ops were seen eagerly; profile with --mode graph");
  FC.addTab("roofline", "Roofline", (host) => FC.makeRoofline(m, host),
    m.hardware || m.timed ? null : "No roofline: profile with --hardware NAME (or --latency)");
  FC.addTab("timeline", "Timeline", (host) => FC.makeTimeline(m, host),
    data.timeline ? null : "No timeline: profile with --latency to measure each op");
}

FC.boot = function () {
  let data;
  try {
    data = JSON.parse(document.getElementById("flopcount-data").textContent);
  } catch (e) {
    FC.fail("its data could not be read (" + e.message + ")");
    return;
  }
  FC.data = data;
  if (data.kind === "report") bootReport(data);
  else if (data.kind === "diff") FC.bootDiff(data);
  else FC.bootDocument(data);
  FC.drawTabs();
  const first = FC.tabs.find((t) => !t.reason);
  if (!FC.showTab(location.hash.slice(1)) && first) FC.showTab(first.id);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") FC.panel.close(); });
  FC.ready = true;
};

try {
  FC.boot();
} catch (e) {
  FC.fail(e.message);
  throw e;
}
