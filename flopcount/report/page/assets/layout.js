"use strict";
// A small layered layout, top to bottom (Sugiyama's steps, as dagre draws Netron's graphs):
// ranks by longest path in execution order, a chain of dummy points for every edge that spans
// ranks, barycenter ordering sweeps, then x from the neighbours' mean under the order and
// spacing constraints (isotonic regression, exact in one pass).

// Pool adjacent violators: x minimizing sum (x - want)^2 with x[k+1] >= x[k] + gap[k].
function placeInOrder(want, gaps) {
  const n = want.length, offset = new Float64Array(n);
  for (let k = 1; k < n; k++) offset[k] = offset[k - 1] + gaps[k - 1];
  const blockSum = [], blockCount = [], blockEnd = [];
  for (let k = 0; k < n; k++) {
    blockSum.push(want[k] - offset[k]); blockCount.push(1); blockEnd.push(k);
    while (blockSum.length > 1) {
      const b = blockSum.length - 1;
      if (blockSum[b - 1] / blockCount[b - 1] <= blockSum[b] / blockCount[b]) break;
      blockSum[b - 1] += blockSum[b]; blockCount[b - 1] += blockCount[b]; blockEnd[b - 1] = blockEnd[b];
      blockSum.pop(); blockCount.pop(); blockEnd.pop();
    }
  }
  const x = new Float64Array(n);
  let k = 0;
  for (let b = 0; b < blockSum.length; b++) {
    const level = blockSum[b] / blockCount[b];
    for (; k <= blockEnd[b]; k++) x[k] = level + offset[k];
  }
  return x;
}

FC.layered = function (nodes, edges, options) {
  const opt = Object.assign({ rankGap: 46, nodeGap: 18, dummyWidth: 6, sweeps: 4, maxDummies: 60000 }, options || {});
  const n = nodes.length;
  // 1. ranks: an edge goes from the earlier node (in execution order) to the later one
  const byOrder = Array.from({ length: n }, (_, i) => i).sort((a, b) => nodes[a].order - nodes[b].order);
  const position = new Int32Array(n);
  byOrder.forEach((v, k) => (position[v] = k));
  const up = Array.from({ length: n }, () => []), down = Array.from({ length: n }, () => []);
  const directed = [];
  for (const [a, b] of edges) {
    if (a === b) continue;
    const [u, v] = position[a] < position[b] ? [a, b] : [b, a];
    up[v].push(u); down[u].push(v);
    directed.push([u, v, u !== a]);
  }
  const rank = new Int32Array(n);
  for (const v of byOrder) for (const u of up[v]) if (rank[u] + 1 > rank[v]) rank[v] = rank[u] + 1;
  // a node that reads only the graph's inputs sits just above its first reader, not at the top
  for (let k = n - 1; k >= 0; k--) {
    const v = byOrder[k];
    if (up[v].length || !down[v].length) continue;
    let lowest = Infinity;
    for (const w of down[v]) lowest = Math.min(lowest, rank[w]);
    rank[v] = Math.max(0, lowest - 1);
  }
  // 2. points: the nodes, then a dummy for every rank an edge crosses
  const width = nodes.map((d) => d.w), height = nodes.map((d) => d.h), pointRank = Array.from(rank);
  const chains = [];
  let dummies = 0;
  for (const [u, v] of directed) dummies += Math.max(0, rank[v] - rank[u] - 1);
  const withDummies = dummies <= opt.maxDummies;
  const nbUp = up.map((l) => l.slice()), nbDown = down.map((l) => l.slice());
  for (const [u, v, reversed] of directed) {
    const chain = [u];
    if (withDummies && rank[v] - rank[u] > 1) {
      // replace the long edge u -> v by u -> d1 -> ... -> v in the neighbour lists
      nbDown[u].splice(nbDown[u].indexOf(v), 1);
      nbUp[v].splice(nbUp[v].indexOf(u), 1);
      let prev = u;
      for (let r = rank[u] + 1; r < rank[v]; r++) {
        const d = width.length;
        width.push(opt.dummyWidth); height.push(0); pointRank.push(r);
        nbUp.push([prev]); nbDown.push([]);
        nbDown[prev].push(d);
        chain.push(d);
        prev = d;
      }
      nbDown[prev].push(v); nbUp[v].push(prev);
    }
    chain.push(v);
    chains.push({ chain, reversed });
  }
  const total = width.length;
  const ranks = pointRank.reduce((a, b) => Math.max(a, b), 0) + 1;
  const layers = Array.from({ length: ranks }, () => []);
  // initial order: nodes in execution order, dummies after the point they come from
  const seed = new Float64Array(total);
  for (let v = 0; v < n; v++) seed[v] = position[v];
  for (const { chain } of chains) for (let k = 1; k < chain.length - 1; k++) seed[chain[k]] = seed[chain[0]] + 0.5;
  Array.from({ length: total }, (_, i) => i).sort((a, b) => seed[a] - seed[b]).forEach((p) => layers[pointRank[p]].push(p));
  // 3. barycenter sweeps
  const index = new Float64Array(total);
  const reindex = (layer) => layer.forEach((p, k) => (index[p] = k));
  layers.forEach(reindex);
  const orderBy = (layer, neighbours) => {
    const key = new Map();
    for (const p of layer) {
      const list = neighbours[p];
      if (!list.length) { key.set(p, index[p]); continue; }
      let s = 0;
      for (const q of list) s += index[q];
      key.set(p, s / list.length);
    }
    layer.sort((a, b) => key.get(a) - key.get(b) || index[a] - index[b]);
    reindex(layer);
  };
  if (total < 40000) {
    for (let s = 0; s < opt.sweeps; s++) {
      for (let r = 1; r < ranks; r++) orderBy(layers[r], nbUp);
      for (let r = ranks - 2; r >= 0; r--) orderBy(layers[r], nbDown);
    }
  }
  // 4. x: packed, then pulled to the mean of the neighbours in the rank above or below
  const x = new Float64Array(total);
  const gapsOf = (layer) => layer.slice(1).map((p, k) => (width[layer[k]] + width[p]) / 2 + opt.nodeGap);
  for (const layer of layers) {
    let at = 0;
    layer.forEach((p, k) => { if (k) at += (width[layer[k - 1]] + width[p]) / 2 + opt.nodeGap; x[p] = at; });
  }
  const pull = (layer, neighbours) => {
    if (!layer.length) return;
    const want = layer.map((p) => {
      const list = neighbours[p];
      if (!list.length) return x[p];
      let s = 0;
      for (const q of list) s += x[q];
      return s / list.length;
    });
    const placed = placeInOrder(want, gapsOf(layer));
    layer.forEach((p, k) => (x[p] = placed[k]));
  };
  for (let s = 0; s < opt.sweeps; s++) {
    for (let r = 1; r < ranks; r++) pull(layers[r], nbUp);
    for (let r = ranks - 2; r >= 0; r--) pull(layers[r], nbDown);
  }
  let minX = Infinity, maxX = -Infinity;
  for (let p = 0; p < total; p++) { minX = Math.min(minX, x[p] - width[p] / 2); maxX = Math.max(maxX, x[p] + width[p] / 2); }
  if (!total) { minX = 0; maxX = 0; }
  for (let p = 0; p < total; p++) x[p] -= minX;
  // 5. y: one band per rank, as tall as its tallest node
  const rankY = new Float64Array(ranks), rankH = new Float64Array(ranks);
  for (let p = 0; p < total; p++) rankH[pointRank[p]] = Math.max(rankH[pointRank[p]], height[p]);
  for (let r = 1; r < ranks; r++) rankY[r] = rankY[r - 1] + rankH[r - 1] + opt.rankGap;
  const y = new Float64Array(total);
  for (let p = 0; p < total; p++) y[p] = rankY[pointRank[p]] + rankH[pointRank[p]] / 2;
  // 6. the edges' points: from the bottom of the upper node to the top of the lower one
  const paths = chains.map(({ chain, reversed }) => {
    const pts = chain.map((p, k) => [x[p], k === 0 ? y[p] + height[p] / 2 : k === chain.length - 1 ? y[p] - height[p] / 2 : y[p]]);
    return reversed ? pts.reverse() : pts;
  });
  const bottom = ranks ? rankY[ranks - 1] + rankH[ranks - 1] : 0;
  return { x: Array.from(x.slice(0, n)), y: Array.from(y.slice(0, n)), paths, width: maxX - minX, height: bottom, ranks: rank };
};

// an SVG path through the points, smooth between ranks
FC.edgePath = function (pts) {
  if (pts.length < 2) return "";
  let d = `M${pts[0][0].toFixed(1)},${pts[0][1].toFixed(1)}`;
  for (let k = 1; k < pts.length; k++) {
    const [x0, y0] = pts[k - 1], [x1, y1] = pts[k];
    const my = (y0 + y1) / 2;
    d += `C${x0.toFixed(1)},${my.toFixed(1)} ${x1.toFixed(1)},${my.toFixed(1)} ${x1.toFixed(1)},${y1.toFixed(1)}`;
  }
  return d;
};
