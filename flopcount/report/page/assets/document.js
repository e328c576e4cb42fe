"use strict";
// An LLM phase (--prefill/--decode/--generate) or a training plan (--plan): its JSON document
// (the one --format json prints) as tabs. Scalars read as key/value tables, lists of records as
// sortable tables with share bars, a list of such lists (a plan's traffic per rank) as one table
// per entry; each phase step (prefill, decode) and each part of a plan (stages, traffic) has its own tab.

const BARRED = /^(macs|flops|bytes|bytes_read|bytes_written|weight_read|kv_read|kv_written|activation_read|activation_written|params|.*_bytes|sent_bytes|time_s|seconds|.*_ms)$/;

function scalar(v) { return v === null || typeof v !== "object"; }
function isRecords(v) { return Array.isArray(v) && v.length > 0 && v.every((x) => x && typeof x === "object" && !Array.isArray(x)); }
function cellText(key, v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") {
    if (/macs$/.test(key)) return FC.fmt.macs(v);
    if (/flops$/.test(key) && !/per/.test(key)) return FC.fmt.flops(v);
    if (/(bytes|_read|_written)$/.test(key)) return FC.fmt.bytes(v);
    if (/^params$/.test(key)) return FC.fmt.params(v);
    if (/_ms$/.test(key)) return FC.fmt.time(v);
    if (/(_s|seconds)$/.test(key)) return FC.fmt.seconds(v);
    return Number.isInteger(v) ? v.toLocaleString("en-US") : FC.pyG(v, 4);
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

FC.recordTable = function (records, id) {
  const keys = [];
  for (const r of records) for (const k in r) if (!keys.includes(k)) keys.push(k);
  const sums = {};
  for (const k of keys) if (BARRED.test(k)) sums[k] = records.reduce((s, r) => s + (typeof r[k] === "number" ? r[k] : 0), 0);
  const state = { sort: null, asc: false };
  const body = FC.el("tbody");
  const head = FC.el("tr", null, keys.map((k) => FC.el("th", { class: "sortable" + (typeof records[0][k] === "number" ? "" : " text"), "data-key": k }, k)));
  head.addEventListener("click", (e) => {
    const th = e.target.closest("th");
    if (!th) return;
    state.asc = state.sort === th.dataset.key ? !state.asc : false;
    state.sort = th.dataset.key;
    for (const h of head.children) h.classList.toggle("sorted", h === th);
    th.classList.toggle("asc", state.asc);
    draw();
  });
  function draw() {
    let order = records.map((_, i) => i);
    if (state.sort) {
      const k = state.sort, sign = state.asc ? 1 : -1;
      order.sort((x, y) => { const a = records[x][k], b = records[y][k]; return a < b ? -sign : a > b ? sign : x - y; });
    }
    body.replaceChildren(...order.map((i) => FC.el("tr", null, keys.map((k) => {
      const v = records[i][k], attrs = { class: typeof v === "number" ? null : "text" };
      if (sums[k] && typeof v === "number") {
        attrs.style = FC.barStyle(v / sums[k], "#4C72B0");
        attrs.title = FC.fmt.percent(v, sums[k]) + " of the column";
      }
      if (typeof v === "number" && Number.isInteger(v)) attrs["data-v"] = String(v);
      return FC.el("td", attrs, cellText(k, v));
    }))));
  }
  draw();
  return FC.el("div", { class: "scroll" }, FC.el("table", { class: "grid", id: id || null }, FC.el("thead", null, head), body));
};

function section(title, value, id) {
  // a dict: its scalars as a key/value table, its lists and dicts as sections below
  const out = FC.el("div", { class: "section", id: id || null }, FC.el("h2", { text: title }));
  if (scalar(value)) { out.appendChild(FC.el("p", { text: cellText(title, value) })); return out; }
  if (isRecords(value)) { out.appendChild(FC.recordTable(value, id ? id + "-table" : null)); return out; }
  if (Array.isArray(value)) {
    if (value.length && value.every(isRecords)) {
      value.forEach((list, k) => out.appendChild(section(`${title} #${k}`, list, id ? `${id}-${k}` : null)));
    } else {
      out.appendChild(FC.el("p", { text: value.map((v) => cellText(title, v)).join(", ") || "(none)" }));
    }
    return out;
  }
  const pairs = Object.keys(value).filter((k) => scalar(value[k]) || (Array.isArray(value[k]) && value[k].every(scalar)))
    .map((k) => [k, Array.isArray(value[k]) ? value[k].map((v) => cellText(k, v)).join(", ") : cellText(k, value[k])]);
  if (pairs.length) out.appendChild(FC.kvTable(pairs));
  for (const k of Object.keys(value)) {
    if (!pairs.find((p) => p[0] === k)) out.appendChild(section(k, value[k], id ? `${id}-${k}` : null));
  }
  return out;
}

FC.bootDocument = function (data) {
  const doc = data.doc;
  const parts = Object.keys(doc).filter((k) => !scalar(doc[k]) && (isRecords(doc[k]) ||
    (Array.isArray(doc[k]) && doc[k].length && doc[k].every(isRecords)) ||
    (!Array.isArray(doc[k]) && Object.values(doc[k]).some((v) => !scalar(v)))));
  const summary = {};
  for (const k of Object.keys(doc)) if (!parts.includes(k)) summary[k] = doc[k];
  document.getElementById("summary").replaceChildren(FC.el("div", { class: "note", text: data.what === "plan" ?
    "A training plan: per stage and rank" : "An LLM phase: per step, group and op" }));
  FC.addTab("summary", "Summary", (host) => host.appendChild(FC.el("div", { class: "scroll" },
    section(data.what === "plan" ? "plan" : String(doc.phase || "phase"), summary, "doc-summary"))));
  for (const k of parts) FC.addTab("doc-" + k, k.replace(/_/g, " "), (host) => host.appendChild(FC.el("div", { class: "scroll" }, section(k, doc[k], "doc-" + k))));
};
