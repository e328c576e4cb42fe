"use strict";
// flopcount diff A B --format html: the two module trees side by side, each row marked as the
// diff matched it (changed, added, removed), a click on a row lighting its counterpart.

function sideModel(side) {
  const rows = FC.columns(side.rows);
  const path = rows.name.slice();
  if (rows.n) path[0] = "";
  return { rows, path, meta: side.meta };
}

FC.bootDiff = function (data) {
  const a = sideModel(data.a), b = sideModel(data.b), d = data.diff;
  const matches = FC.columns(data.matches);
  // each side's row name -> [status, index of the match]
  const statusA = new Map(), statusB = new Map();
  for (let k = 0; k < matches.n; k++) {
    if (matches.name_a[k] !== null && matches.name_a[k] !== undefined) statusA.set(matches.name_a[k], k);
    if (matches.name_b[k] !== null && matches.name_b[k] !== undefined) statusB.set(matches.name_b[k], k);
  }
  const delta = (measure, fmt) => {
    const t = d.totals[measure];
    if (!t || t.a === null || t.b === null) return null;
    const sign = t.delta > 0 ? "+" : t.delta < 0 ? "\u2212" : "\u00b1";
    return card(measure === "latency_ms" ? "Latency" : measure.toUpperCase(),
      `${fmt(t.a)} \u2192 ${fmt(t.b)}  (${sign}${fmt(Math.abs(t.delta))})`);
  };
  document.getElementById("summary").replaceChildren(
    FC.el("div", { class: "cards" }, [delta("macs", FC.fmt.macs), delta("flops", FC.fmt.flops),
      delta("params", FC.fmt.params), delta("bytes", FC.fmt.bytes), delta("latency_ms", FC.fmt.time)].filter((x) => x)),
    FC.el("div", { class: "note", id: "diff-counts",
      text: `${d.a} (A) vs ${d.b} (B), by ${d.by}: ` + ["changed", "added", "removed", "same"].map((s) => `${d.counts[s]} ${s}`).join(", ") }));
  FC.addTab("compare", "Compare", (host) => FC.makeCompare(host, a, b, matches, statusA, statusB));
};

FC.makeCompare = function (host, a, b, matches, statusA, statusB) {
  const state = { onlyDiff: false, filter: "" };
  const only = FC.el("input", { type: "checkbox", id: "compare-only" });
  only.addEventListener("change", () => { state.onlyDiff = only.checked; draw(); });
  const filter = FC.el("input", { type: "search", id: "compare-filter", placeholder: "filter: name or type" });
  filter.addEventListener("input", () => { state.filter = filter.value.trim().toLowerCase(); draw(); });
  host.appendChild(FC.el("div", { class: "toolbar" }, FC.el("label", { for: "compare-only" }, only, " only the differences"), filter,
    FC.el("span", { class: "legend" }, FC.el("span", { class: "status-changed", text: " changed " }), " ",
      FC.el("span", { class: "status-added", text: " only in B " }), " ", FC.el("span", { class: "status-removed", text: " only in A " }))));
  const tables = {};
  const make = (which) => {
    const body = FC.el("tbody");
    const table = FC.el("table", { class: "grid", id: "compare-" + which }, FC.el("thead", null, FC.el("tr", null,
      FC.el("th", { class: "text" }, which.toUpperCase() + ": " + (which === "a" ? a : b).meta.model),
      FC.el("th", { class: "text" }, "Type"), FC.el("th", null, "Params"), FC.el("th", null, "MACs"), FC.el("th", null, "FLOPs"))), body);
    tables[which] = body;
    body.addEventListener("click", (e) => {
      const tr = e.target.closest("tr[data-match]");
      for (const old of host.querySelectorAll("tr.selected")) old.classList.remove("selected");
      if (!tr) return;
      for (const same of host.querySelectorAll(`tr[data-match="${tr.dataset.match}"]`)) {
        same.classList.add("selected");
        if (same !== tr) same.scrollIntoView({ block: "nearest" });
      }
    });
    return FC.el("div", { class: "scroll" }, table);
  };
  host.appendChild(FC.el("div", { class: "compare" }, make("a"), make("b")));
  function statusOf(which, name) {
    const k = (which === "a" ? statusA : statusB).get(name);
    return k === undefined ? ["same", -1] : [matches.status[k], k];
  }
  function draw() {
    for (const which of ["a", "b"]) {
      const side = which === "a" ? a : b, r = side.rows, frag = document.createDocumentFragment();
      for (let i = 0; i < r.n; i++) {
        const [status, k] = i === 0 ? ["same", -1] : statusOf(which, r.name[i]);
        if (state.onlyDiff && status === "same" && i !== 0) continue;
        if (state.filter && !(r.name[i].toLowerCase().includes(state.filter) || String(r.type[i]).toLowerCase().includes(state.filter))) continue;
        const label = i === 0 ? r.name[0] : r.name[i].slice(r.name[i].lastIndexOf(".") + 1);
        frag.appendChild(FC.el("tr", { class: status === "same" ? null : "status-" + status, "data-match": k >= 0 ? k : null, "data-name": side.path[i], "data-status": status },
          FC.el("td", { class: "text name", title: side.path[i] || r.name[0], style: { paddingLeft: 4 + 14 * r.depth[i] + "px" } }, label),
          FC.el("td", { class: "text", text: r.type[i] }), FC.el("td", { text: FC.fmt.params(r.params[i]) }),
          FC.el("td", { text: FC.fmt.macs(r.macs[i]) }), FC.el("td", { text: FC.fmt.flops(r.flops[i]) })));
      }
      tables[which].replaceChildren(frag);
    }
  }
  draw();
  FC.compareView = { state, draw };
};
