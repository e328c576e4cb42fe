"use strict";
// The timeline: the Chrome trace's slices (the same events --format trace writes), modules over
// their ops, one band per pass (forward, then backward). Drawn on a canvas: a decoder's ten
// thousand slices are one draw call each. Wheel zooms around the pointer, drag pans, a click
// opens the op's or the module's panel.

const LANE = 18;

FC.makeTimeline = function (m, host) {
  const t = FC.columns(m.data.timeline);
  const n = t.n;
  // each slice's depth: slices of a thread nest (a module's span holds its ops), in time order
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) =>
    t.thread[a] === t.thread[b] ? (t.ts[a] - t.ts[b]) || (t.dur[b] - t.dur[a]) : (t.thread[a] === "forward" ? -1 : 1));
  const depth = new Int32Array(n), threads = [];
  const stack = [];
  let thread = null;
  for (const i of order) {
    if (t.thread[i] !== thread) { thread = t.thread[i]; threads.push({ name: thread, depth: 0 }); stack.length = 0; }
    while (stack.length && t.ts[stack[stack.length - 1]] + t.dur[stack[stack.length - 1]] <= t.ts[i] + 1e-9) stack.pop();
    depth[i] = stack.length;
    stack.push(i);
    threads[threads.length - 1].depth = Math.max(threads[threads.length - 1].depth, depth[i] + 1);
  }
  let top = 24;
  const bandTop = {};
  for (const th of threads) { bandTop[th.name] = top + 16; top += 16 + th.depth * LANE + 12; }
  let end = 1;
  for (let i = 0; i < n; i++) end = Math.max(end, t.ts[i] + t.dur[i]);
  const names = t.name.map((s) => s.slice(Math.max(s.lastIndexOf("."), s.lastIndexOf("/")) + 1));

  const info = FC.el("span", { class: "note", id: "timeline-info",
    text: `${n.toLocaleString("en-US")} slices (the Chrome trace's), ${FC.fmt.time(end / 1e3)} laid end to end; wheel to zoom, drag to pan` });
  host.appendChild(FC.el("div", { class: "toolbar" },
    FC.el("button", { class: "small", id: "timeline-reset", onclick: () => { view.x0 = 0; view.x1 = end; draw(); } }, "Whole run"), info));
  const canvas = FC.el("canvas", { id: "timeline-canvas" });
  const box = FC.el("div", { class: "chart-host" }, canvas);
  host.appendChild(box);
  const view = { x0: 0, x1: end };
  let width = 800;
  const px = (us) => ((us - view.x0) / (view.x1 - view.x0)) * width;

  function color(i) {
    if (t.op[i] < 0) return "#d9dee5";
    const op = m.ops.op[t.op[i]];
    let h = 0;
    for (let k = 0; k < op.length; k++) h = (h * 31 + op.charCodeAt(k)) | 0;
    return FC.palette[Math.abs(h) % FC.palette.length];
  }
  function draw() {
    width = Math.max(300, box.clientWidth || 800);
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio; canvas.height = top * ratio;
    canvas.style.width = width + "px"; canvas.style.height = top + "px";
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, top);
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#555";
    for (let k = 0; k <= 5; k++) {
      const us = view.x0 + (k / 5) * (view.x1 - view.x0);
      g.fillText(FC.fmt.time(us / 1e3), Math.min(width - 50, px(us) + 2), 12);
    }
    for (const th of threads) { g.fillStyle = "#222"; g.fillText(th.name, 2, bandTop[th.name] - 4); }
    for (let i = 0; i < n; i++) {
      const x0 = px(t.ts[i]), x1 = px(t.ts[i] + t.dur[i]);
      if (x1 < 0 || x0 > width) continue;
      const y = bandTop[t.thread[i]] + depth[i] * LANE, w = Math.max(1, x1 - x0);
      g.fillStyle = color(i);
      g.fillRect(x0, y, w, LANE - 2);
      if (w > 30) {
        g.fillStyle = t.op[i] < 0 ? "#222" : "#fff";
        g.save(); g.beginPath(); g.rect(x0, y, w, LANE - 2); g.clip();
        g.fillText(names[i], x0 + 3, y + 12);
        g.restore();
      }
    }
  }
  function at(event) {
    const r = canvas.getBoundingClientRect(), x = event.clientX - r.left, y = event.clientY - r.top;
    const us = view.x0 + (x / width) * (view.x1 - view.x0);
    let best = -1;
    for (let i = 0; i < n; i++) {
      const y0 = bandTop[t.thread[i]] + depth[i] * LANE;
      if (y >= y0 && y < y0 + LANE && us >= t.ts[i] && us <= t.ts[i] + t.dur[i]) best = i;
    }
    return best;
  }
  let drag = null;
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect(), f = (e.clientX - r.left) / width;
    const at = view.x0 + f * (view.x1 - view.x0), k = e.deltaY > 0 ? 1.25 : 0.8;
    const span = Math.min(end, Math.max(end / 1e6, (view.x1 - view.x0) * k));
    view.x0 = Math.max(0, at - f * span); view.x1 = view.x0 + span;
    draw();
  }, { passive: false });
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, x0: view.x0, x1: view.x1, moved: false }; });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
  canvas.addEventListener("mousemove", (e) => {
    if (drag && e.buttons) {
      const shift = ((drag.x - e.clientX) / width) * (drag.x1 - drag.x0);
      if (Math.abs(drag.x - e.clientX) > 2) drag.moved = true;
      view.x0 = drag.x0 + shift; view.x1 = drag.x1 + shift;
      draw();
      return;
    }
    const i = at(e);
    if (i < 0) { FC.tooltip.hide(); return; }
    FC.tooltip.show(`${t.name[i]}\n${t.op[i] >= 0 ? m.ops.op[t.op[i]] + ", " : ""}${FC.fmt.time(t.dur[i] / 1e3)} from ${FC.fmt.time(t.ts[i] / 1e3)}`, e);
  });
  canvas.addEventListener("mouseleave", () => FC.tooltip.hide());
  canvas.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const i = at(e);
    if (i < 0) return;
    if (t.op[i] >= 0) FC.opPanel(m, t.op[i]);
    else if (m.rowByPath.has(t.name[i])) FC.rowPanel(m, m.rowByPath.get(t.name[i]));
  });
  FC.timed("timeline", draw);
  FC.timelineView = { slices: t, depth, draw, view };
  return FC.timelineView;
};
