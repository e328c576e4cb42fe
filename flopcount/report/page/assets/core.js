"use strict";
// flopcount report page: shared pieces. Every number on the page comes from the embedded data
// (the report's own JSON, packed in columns); nothing here computes a cost.
const FC = (window.flopcount = window.flopcount || {});
FC.timings = {};

// ---- the embedded data ---------------------------------------------------------------------
// A table is {n, c: {column: values}}; a column whose values repeat is {d: distinct, i: indices}.
FC.column = function (table, name) {
  const c = table && table.c[name];
  if (c === undefined || c === null) return null;
  if (Array.isArray(c)) return c;
  const out = new Array(c.i.length);
  for (let k = 0; k < c.i.length; k++) out[k] = c.d[c.i[k]];
  return out;
};
FC.columns = function (table) {
  const out = { n: table ? table.n : 0 };
  if (table) for (const name in table.c) out[name] = FC.column(table, name);
  return out;
};
FC.record = function (cols, i) {
  const out = {};
  for (const name in cols) if (name !== "n") out[name] = cols[name][i];
  return out;
};

// ---- numbers as flopcount prints them (flopcount/report/units.py, digit for digit) -----------
function isTie(x, p) {
  // x lies exactly halfway between two p-decimal numbers iff x * 2^(p+1) is an odd integer
  const y = Math.abs(x) * Math.pow(2, p + 1);
  return Number.isInteger(y) && y % 2 === 1;
}
FC.pyRound = function (x, p) {
  // Python's round(x, p): the exact binary value rounded, halves to even
  if (!isFinite(x)) return x;
  if (isTie(x, p)) {
    const scale = Math.pow(10, p), lo = Math.floor(Math.abs(x) * scale);
    const n = lo % 2 === 0 ? lo : lo + 1;
    return Math.sign(x) * n / scale;
  }
  return Number(x.toFixed(p));
};
function exponentText(e) {
  return (e < 0 ? "-" : "+") + String(Math.abs(e)).padStart(2, "0");
}
FC.pyRepr = function (x) {
  // Python's repr of a float: the shortest digits, '.0' on whole numbers, 1e+16 and 1e-05 forms
  if (Number.isNaN(x)) return "nan";
  if (!isFinite(x)) return x > 0 ? "inf" : "-inf";
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e16 || a < 1e-4)) {
    const [m, e] = x.toExponential().split("e");
    return m + "e" + exponentText(Number(e));
  }
  const s = String(x);
  return Number.isInteger(x) ? s + ".0" : s;
};
FC.pyG = function (x, prec) {
  // Python's format(x, '.{prec}g')
  if (x === 0) return "0";
  if (!isFinite(x)) return FC.pyRepr(x);
  const [, es] = x.toExponential(prec - 1).split("e");
  const e = Number(es);
  let s;
  if (e >= -4 && e < prec) {
    s = x.toFixed(Math.max(0, prec - 1 - e));
    if (s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
  } else {
    let [m] = x.toExponential(prec - 1).split("e");
    if (m.indexOf(".") >= 0) m = m.replace(/0+$/, "").replace(/\.$/, "");
    s = m + "e" + exponentText(e);
  }
  return s;
};
const MAC_UNITS = [["TMac", 1e12], ["GMac", 1e9], ["MMac", 1e6], ["KMac", 1e3]];
const FLOP_UNITS = [["PFLOPs", 1e15], ["TFLOPs", 1e12], ["GFLOPs", 1e9], ["MFLOPs", 1e6], ["KFLOPs", 1e3]];
const PARAM_UNITS = [["M", 1e6], ["k", 1e3]];
const PARAM_UNITS_BIG = [["B", 1e9], ["M", 1e6], ["k", 1e3]];
const BYTE_UNITS = [["PB", 1e15], ["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["KB", 1e3]];
function scaled(value, table, base, precision) {
  for (const [name, scale] of table) {
    if (Math.abs(value) >= scale) return FC.pyRepr(FC.pyRound(value / scale, precision)) + " " + name;
  }
  const text = Number.isInteger(value) ? String(value) : FC.pyRepr(FC.pyRound(value, precision));
  return base ? text + " " + base : text;
}
FC.fmt = {
  macs: (v) => (v === null || v === undefined ? "-" : scaled(v, MAC_UNITS, "Mac", 2)),
  flops: (v) => (v === null || v === undefined ? "-" : scaled(v, FLOP_UNITS, "FLOPs", 2)),
  params: (v) => (v === null || v === undefined ? "-" :
    Math.abs(v) < 1e9 ? scaled(v, PARAM_UNITS, "", 2) : scaled(v, PARAM_UNITS_BIG, "", 2)),
  bytes: (v) => (v === null || v === undefined ? "-" : scaled(v, BYTE_UNITS, "B", 2)),
  time: function (ms) {
    if (ms === null || ms === undefined) return "-";
    const r = Number(FC.pyG(ms, 3));
    if (r >= 1000) return FC.pyG(ms / 1000, 3) + " s";
    if (r >= 1) return FC.pyG(ms, 3) + " ms";
    return FC.pyG(ms * 1000, 3) + " \u00b5s";
  },
  seconds: (s) => (s === null || s === undefined ? "-" : FC.fmt.time(s * 1e3)),
  rate: function (perSecond, unit) {
    if (perSecond === null || perSecond === undefined) return "-";
    for (const [prefix, scale] of [["T", 1e12], ["G", 1e9], ["M", 1e6], ["K", 1e3]]) {
      if (perSecond >= scale) return FC.pyG(perSecond / scale, 3) + " " + prefix + unit + "/s";
    }
    return FC.pyG(perSecond, 3) + " " + unit + "/s";
  },
  percent: function (part, whole) {
    if (!whole) return "-";
    return FC.pyRound(100.0 * part / whole, 2).toFixed(2) + "%";
  },
  count: (v) => (v === null || v === undefined ? "-" : Number(v).toLocaleString("en-US")),
  shape: (s) => (s === null || s === undefined ? "-" : s.join("x")),
  shapes: function (list) {
    if (!list || !list.length) return "";
    const shown = list.slice(0, 8).map(FC.fmt.shape).join(", ");
    return list.length > 8 ? shown + ", ... (" + list.length.toLocaleString("en-US") + " inputs)" : shown;
  },
  ratio: (v) => (v === null || v === undefined ? "-" : (100 * v).toFixed(1) + "%"),
  plain: (v) => (v === null || v === undefined ? "-" : String(v)),
};

// ---- DOM -----------------------------------------------------------------------------------
FC.el = function (tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const key in attrs) {
      const value = attrs[key];
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "style" && typeof value === "object") Object.assign(node.style, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
  return node;
};
const SVG_NS = "http://www.w3.org/2000/svg";
FC.svg = function (tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  if (attrs) for (const key in attrs) {
    const value = attrs[key];
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) if (child) node.appendChild(child);
  return node;
};
FC.kvTable = function (pairs) {
  return FC.el("table", null, pairs.filter((p) => p).map(([k, v]) =>
    FC.el("tr", null, FC.el("td", { text: k }), FC.el("td", null, v instanceof Node ? v : String(v)))));
};
// a share as a bar behind a cell's text (the notebook table's look)
FC.barStyle = function (share, color) {
  if (share === null || share === undefined || !isFinite(share)) return null;
  const pct = Math.max(0, Math.min(100, share * 100)).toFixed(2);
  return `background-image:linear-gradient(90deg,${color}55 ${pct}%,transparent ${pct}%)`;
};

// ---- tooltip, side panel, tabs -------------------------------------------------------------
FC.tooltip = {
  show(text, event) {
    const tip = document.getElementById("tooltip");
    tip.textContent = text;
    tip.hidden = false;
    const x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = Math.max(0, y) + "px";
  },
  hide() { document.getElementById("tooltip").hidden = true; },
};
FC.panel = {
  show(title, ...content) {
    const panel = document.getElementById("panel");
    panel.replaceChildren(
      FC.el("button", { class: "close small", title: "Close", onclick: () => FC.panel.close() }, "\u00d7"),
      FC.el("h2", { text: title }), ...content);
    panel.hidden = false;
  },
  close() { document.getElementById("panel").hidden = true; },
};
FC.tabs = [];
FC.addTab = function (id, label, make, reason) {
  // make(host) draws the view the first time its tab opens; reason: why it is not available
  FC.tabs.push({ id, label, make, reason, made: false, host: null });
};
FC.showTab = function (id) {
  const tab = FC.tabs.find((t) => t.id === id && !t.reason);
  if (!tab) return false;
  for (const t of FC.tabs) {
    if (t.button) t.button.setAttribute("aria-selected", String(t === tab));
    if (t.host) t.host.hidden = t !== tab;
  }
  if (!tab.made) {
    tab.made = true;
    tab.make(tab.host);
  } else if (tab.shown) {
    tab.shown();
  }
  FC.current = id;
  if (history.replaceState) history.replaceState(null, "", "#" + id);
  return true;
};
FC.drawTabs = function () {
  const nav = document.getElementById("tabs"), views = document.getElementById("views");
  for (const tab of FC.tabs) {
    tab.host = FC.el("section", { class: "view", id: "view-" + tab.id, hidden: true });
    views.appendChild(tab.host);
    tab.button = FC.el("button", {
      role: "tab", id: "tab-" + tab.id, disabled: !!tab.reason, title: tab.reason || null,
      "aria-selected": "false", onclick: () => FC.showTab(tab.id),
    }, tab.label);
    nav.appendChild(tab.button);
  }
};
FC.fail = function (message) {
  const bar = FC.el("div", { id: "error" }, "This page could not draw itself: " + message);
  document.body.insertBefore(bar, document.body.firstChild);
};
// a view draws with the browser's next frame, so its first draw is timed as the user sees it
FC.timed = function (name, fn) {
  const start = performance.now();
  const out = fn();
  FC.timings[name] = performance.now() - start;
  return out;
};
// a metric's color scale: light to dark on a log scale between the smallest and largest value
FC.heat = function (values) {
  const positive = values.filter((v) => v > 0);
  if (!positive.length) return () => "#f6f8fa";
  let lo = Infinity, hi = -Infinity;
  for (const v of positive) { if (v < lo) lo = v; if (v > hi) hi = v; }
  const llo = Math.log(lo), span = Math.log(hi) - llo || 1;
  const at = (v) => (Math.log(v) - llo) / span;
  const scale = function (v) {
    if (!(v > 0)) return "#f6f8fa";
    const t = at(v);
    // from #eef4fb to #1f4e8c
    const r = Math.round(238 - t * (238 - 31)), g = Math.round(244 - t * (244 - 78)), b = Math.round(251 - t * (251 - 140));
    return `rgb(${r},${g},${b})`;
  };
  scale.dark = (v) => v > 0 && at(v) > 0.6; // white text reads better there
  return scale;
};
FC.boundColor = (b) => (b === "compute" ? "#9db7de" : b === "memory" ? "#f1bf97" : "#f6f8fa");
FC.palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"];
