"use strict";
// A roofline chart: points at (FLOPs per byte moved, FLOP/s) on log-log axes under the
// hardware's roofs, as report.plot(kind="roofline") draws them. Hover shows a point, a click
// hands it to onPick.

function logTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const v = Math.pow(10, e);
    if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
  }
  return out;
}
function siText(v) {
  for (const [p, s] of [["P", 1e15], ["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]]) if (v >= s) return FC.pyG(v / s, 3) + p;
  return FC.pyG(v, 3);
}

// points: [{x, y, group, label, key}]; roofs: {matrix, vector, bandwidth, text} or null
FC.rooflineChart = function (host, spec) {
  const { points, roofs } = spec;
  const chart = FC.el("div", { class: "chart-host", id: spec.id || null });
  const legend = FC.el("div", { class: "legend section" });
  host.append(legend, chart);
  const counts = new Map();
  for (const p of points) counts.set(p.group, (counts.get(p.group) || 0) + 1);
  const colored = Array.from(counts.keys()).sort((a, b) => counts.get(b) - counts.get(a) || (a < b ? -1 : 1)).slice(0, 8);
  const colorOf = (g) => (colored.indexOf(g) >= 0 ? FC.palette[colored.indexOf(g)] : "#BBBBBB");
  legend.append(...colored.map((g) => FC.el("span", null, FC.el("i", { style: { background: colorOf(g) } }), `${g} (${counts.get(g)})`)));
  if (counts.size > colored.length) {
    const rest = points.filter((p) => colored.indexOf(p.group) < 0).length;
    legend.append(FC.el("span", null, FC.el("i", { style: { background: "#BBBBBB" } }), `other (${rest})`));
  }
  if (roofs) legend.append(FC.el("span", { class: "muted" }, roofs.text));
  let selected = null;

  function draw() {
    const W = Math.max(360, chart.clientWidth || 900), H = Math.max(260, chart.clientHeight || 520);
    const m = { l: 70, r: 20, t: 16, b: 44 };
    const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
    const ridge = roofs ? roofs.matrix / roofs.bandwidth : 1;
    const xlo = Math.min(0.05, ...(xs.length ? [Math.min(...xs) / 2] : [1]));
    const xhi = Math.max(roofs ? 4 * ridge : 10, ...(xs.length ? [Math.max(...xs) * 2] : [10]));
    const ylo = Math.max(1, Math.min(...(ys.length ? [Math.min(...ys) / 3] : [1e6]), roofs ? roofs.bandwidth * xlo : Infinity));
    const yhi = Math.max(roofs ? roofs.matrix * 2 : 0, ...(ys.length ? [Math.max(...ys) * 2] : [1e9]));
    const X = (v) => m.l + (Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo)) * (W - m.l - m.r);
    const Y = (v) => H - m.b - (Math.log10(v) - Math.log10(ylo)) / (Math.log10(yhi) - Math.log10(ylo)) * (H - m.t - m.b);
    const svg = FC.svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    const axis = FC.svg("g", { class: "axis" });
    for (const v of logTicks(xlo, xhi)) {
      axis.append(FC.svg("line", { x1: X(v), x2: X(v), y1: m.t, y2: H - m.b, stroke: "#eaeef2" }),
        FC.svg("text", { x: X(v), y: H - m.b + 14, "text-anchor": "middle", text: siText(v) }));
    }
    for (const v of logTicks(ylo, yhi)) {
      axis.append(FC.svg("line", { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), stroke: "#eaeef2" }),
        FC.svg("text", { x: m.l - 6, y: Y(v) + 3, "text-anchor": "end", text: siText(v) }));
    }
    axis.append(FC.svg("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle", text: spec.xlabel }),
      FC.svg("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})`, text: spec.ylabel }));
    svg.append(axis);
    if (roofs) {
      const line = (peak, dash) => {
        const knee = Math.min(Math.max(peak / roofs.bandwidth, xlo), xhi);
        const pts = [[xlo, Math.min(peak, roofs.bandwidth * xlo)], [knee, Math.min(peak, roofs.bandwidth * knee)], [xhi, peak]];
        return FC.svg("polyline", { points: pts.map(([a, b]) => `${X(a).toFixed(1)},${Y(b).toFixed(1)}`).join(" "),
                                    fill: "none", stroke: dash ? "#8c959f" : "#1f2328", "stroke-width": dash ? 1 : 1.6, "stroke-dasharray": dash ? "5 3" : null });
      };
      svg.append(line(roofs.matrix, false), line(roofs.vector, true));
    }
    const dots = FC.svg("g");
    points.forEach((p, k) => dots.appendChild(FC.svg("circle", {
      class: "roof-point" + (selected === k ? " selected" : ""), cx: X(p.x).toFixed(1), cy: Y(p.y).toFixed(1), r: 4,
      fill: colorOf(p.group), "fill-opacity": 0.8, "data-point": k, "data-key": p.key,
    })));
    svg.append(dots);
    chart.replaceChildren(svg);
  }
  chart.addEventListener("mousemove", (e) => {
    const dot = e.target.closest(".roof-point");
    if (!dot) { FC.tooltip.hide(); return; }
    FC.tooltip.show(points[Number(dot.dataset.point)].label, e);
  });
  chart.addEventListener("mouseleave", () => FC.tooltip.hide());
  chart.addEventListener("click", (e) => {
    const dot = e.target.closest(".roof-point");
    if (!dot) return;
    selected = Number(dot.dataset.point);
    chart.querySelectorAll(".roof-point.selected").forEach((d) => d.classList.remove("selected"));
    dot.classList.add("selected");
    if (spec.onPick) spec.onPick(points[selected]);
  });
  window.addEventListener("resize", () => { if (chart.offsetParent) draw(); });
  requestAnimationFrame(draw);
  draw();
  return { draw };
};

FC.makeRoofline = function (m, host) {
  const o = m.ops, hw = m.hardware, points = [];
  for (let i = 0; i < o.n; i++) {
    if (o.phase[i] !== "forward") continue;
    const moved = o.bytes_read[i] + o.bytes_written[i];
    if (!(o.flops[i] > 0) || !(moved > 0)) continue;
    const ms = m.timed ? m.opValue("latency_ms", i) : m.opValue("roofline_ms", i);
    if (!ms) continue;
    const x = o.flops[i] / moved, y = o.flops[i] / (ms / 1e3);
    points.push({ x, y, group: o.op[i], key: i,
      label: `${o.name[i]}\n${o.op[i]}: ${FC.pyG(x, 3)} FLOP/byte, ${FC.fmt.rate(y, "FLOP")}\n` +
             `${FC.fmt.flops(o.flops[i])}, ${FC.fmt.bytes(moved)} moved, ${FC.fmt.time(ms)}` +
             (m.opValue("bound", i) ? `, ${m.opValue("bound", i)}-bound` : "") });
  }
  const roofs = hw ? { matrix: hw.matrix_flops, vector: hw.vector_flops, bandwidth: hw.memory_bandwidth,
    text: `roofs of ${hw.title}: ${FC.pyG(hw.matrix_flops / 1e12, 3)} TFLOP/s ${hw.dtype} matrix, ` +
          `${FC.pyG(hw.vector_flops / 1e12, 3)} TFLOP/s vector (dashed), ${FC.pyG(hw.memory_bandwidth / 1e9, 3)} GB/s` } : null;
  host.appendChild(FC.el("div", { class: "toolbar" }, FC.el("span", { class: "note" },
    `${points.length.toLocaleString("en-US")} forward ops that compute and move bytes, at ` +
    (m.timed ? "the FLOP/s they achieved (measured)" : "their roofline estimate (on the roof by construction)") +
    (hw ? "" : "; profile with --hardware NAME to draw a device's roofs") + ". Click one to find it in the tree and the graph.")));
  FC.rooflineView = FC.rooflineChart(host, {
    id: "roofline-chart", points, roofs,
    xlabel: "arithmetic intensity (FLOPs per byte read and written)",
    ylabel: "FLOP/s " + (m.timed ? "achieved (measured)" : "estimated (roofline)"),
    onPick: (p) => FC.opPanel(m, p.key),
  });
};
