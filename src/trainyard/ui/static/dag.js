// A DAG laid out in layers (Sugiyama-style, small): longest-path layers from the sources, then a few
// barycenter sweeps to order each layer so edges cross less, then coordinates, left to right.
// Nodes are HTML (real links, text that wraps and can be selected); the edges are one SVG beneath them.

const SVG = "http://www.w3.org/2000/svg";
const GAP_X = 64;   // between layers
const GAP_Y = 18;   // between nodes of a layer
const SWEEPS = 4;

// nodes: [{id, w, h}], edges: [[from, to]] -> {pos: Map(id -> {x, y, w, h}), width, height}
export function layout(nodes, edges) {
  const preds = new Map(nodes.map((n) => [n.id, []]));
  const succs = new Map(nodes.map((n) => [n.id, []]));
  for (const [a, b] of edges) {
    if (!preds.has(a) || !preds.has(b) || a === b) continue;
    preds.get(b).push(a);
    succs.get(a).push(b);
  }
  // longest path from a source; the graph is acyclic (the server refuses cycles), guard anyway
  const layer = new Map();
  const visiting = new Set();
  const depth = (id) => {
    if (layer.has(id)) return layer.get(id);
    if (visiting.has(id)) return 0;
    visiting.add(id);
    const d = preds.get(id).reduce((m, p) => Math.max(m, depth(p) + 1), 0);
    visiting.delete(id);
    layer.set(id, d);
    return d;
  };
  nodes.forEach((n) => depth(n.id));
  const layers = [];
  for (const n of nodes) (layers[layer.get(n.id)] ||= []).push(n);
  const index = new Map();
  const reindex = (l) => l.forEach((n, i) => index.set(n.id, i));
  layers.forEach(reindex);
  const bary = (n, nbrs) => {
    const ps = nbrs.get(n.id);
    return ps.length ? ps.reduce((s, p) => s + index.get(p), 0) / ps.length : index.get(n.id);
  };
  for (let s = 0; s < SWEEPS; s++) {
    const down = s % 2 === 0;
    const order = down ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const l of order) {
      const key = new Map(l.map((n) => [n.id, bary(n, down ? preds : succs)]));
      l.sort((a, b) => key.get(a.id) - key.get(b.id));  // stable: ties keep their order
      reindex(l);
    }
  }
  // coordinates: each layer a column as wide as its widest node, centred on the tallest column
  const heights = layers.map((l) => l.reduce((s, n) => s + n.h, 0) + GAP_Y * (l.length - 1));
  const height = Math.max(0, ...heights);
  const pos = new Map();
  let x = 0;
  layers.forEach((l, i) => {
    const w = Math.max(...l.map((n) => n.w));
    let y = (height - heights[i]) / 2;
    for (const n of l) {
      pos.set(n.id, { x: x + (w - n.w) / 2, y, w: n.w, h: n.h });
      y += n.h + GAP_Y;
    }
    x += w + GAP_X;
  });
  return { pos, width: Math.max(0, x - GAP_X), height };
}

// Draw into `el`: `nodeEl(node)` makes each node's element (sized n.w × n.h); edges as curves
export function drawDag(el, nodes, edges, nodeEl) {
  const { pos, width, height } = layout(nodes, edges);
  const pad = 12;
  const box = document.createElement("div");
  box.className = "dag";
  box.style.width = `${width + 2 * pad}px`;
  box.style.height = `${height + 2 * pad}px`;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", width + 2 * pad);
  svg.setAttribute("height", height + 2 * pad);
  svg.setAttribute("aria-hidden", "true");
  const defs = document.createElementNS(SVG, "defs");
  defs.innerHTML = '<marker id="dag-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker>';
  svg.append(defs);
  for (const [a, b] of edges) {
    const p = pos.get(a);
    const q = pos.get(b);
    if (!p || !q) continue;
    const x1 = p.x + p.w + pad;
    const y1 = p.y + p.h / 2 + pad;
    const x2 = q.x + pad;
    const y2 = q.y + q.h / 2 + pad;
    const mid = (x1 + x2) / 2;
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`);
    path.setAttribute("marker-end", "url(#dag-arrow)");
    path.dataset.edge = `${a}->${b}`;
    svg.append(path);
  }
  box.append(svg);
  for (const n of nodes) {
    const p = pos.get(n.id);
    const node = nodeEl(n);
    Object.assign(node.style, { left: `${p.x + pad}px`, top: `${p.y + pad}px`, width: `${p.w}px`, height: `${p.h}px` });
    box.append(node);
  }
  el.replaceChildren(box);
  return box;
}
