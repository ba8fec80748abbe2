// Line charts of metric series, drawn with uPlot (vendor/, MIT): one chart per metric, one series per
// job or replica, x as step or time, hover to read values in the legend.
import { css, script } from "./assets.js";
import { h } from "./ui.js";

// steps are whole numbers: ticks never fall between two
const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];
const COLORS = ["#2f6fde", "#c62828", "#1a7f37", "#9a6700", "#8250df", "#bc4c00", "#0a7ea4", "#bf3989", "#57606a", "#116329"];

export async function loadUPlot() {
  css("/ui/vendor/uPlot.min.css");
  css("/ui/views.css");
  await script("/ui/vendor/uPlot.iife.min.js");
  return window.uPlot;
}

// series: [{label, xs, ys}] each sorted by x; returns uPlot's aligned data [xs, ys1, ys2, …] (null where a
// series has no point at that x). One series needs no merge: its arrays are used as they are.
export function align(series) {
  if (series.length === 1) return [series[0].xs, series[0].ys];
  const all = new Float64Array(series.reduce((n, s) => n + s.xs.length, 0));
  let k = 0;
  for (const s of series) for (const x of s.xs) all[k++] = x;
  all.sort();
  const xs = [];
  for (let i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[i - 1]) xs.push(all[i]);
  const out = [xs];
  for (const s of series) {
    const ys = new Array(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < s.xs.length; i++) {
      while (xs[j] < s.xs[i]) j++;
      ys[j] = s.ys[i];
    }
    out.push(ys);
  }
  return out;
}

// A chart in `el`: {title, xLabel, time: x is Unix seconds, series: [{label, xs, ys}]}. Returns the uPlot
// object (call .destroy() when the page goes); `width` defaults to the element's.
export async function lineChart(el, { title, series, time = false, width, height = 220 }) {
  const uPlot = await loadUPlot();
  const bytesAxis = /bytes$/.test(title || "");
  const opts = {
    title,
    width: width || Math.max(300, el.clientWidth || 600),
    height,
    scales: { x: { time } },
    series: [
      { label: time ? "time" : "step", value: time ? undefined : (u, v) => (v === null || v === undefined ? "–" : String(v)) },
      ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
        points: { show: s.xs.length < 60 } })),
    ],
    axes: [time ? {} : { incrs: STEP_INCRS },
      { size: axisSize, values: (u, ticks) => ticks.map((v) => axisNumber(v, bytesAxis)) }],
    cursor: { drag: { x: true, y: false } },
  };
  return new uPlot(opts, align(series), el);
}

const SI = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];

// A y tick short enough for its axis: 1.5M, 20MB (a metric named …bytes: the ticks fall on round decimal
// numbers, so decimal units keep them round), 0.003, 1e-7
export function axisNumber(v, bytes = false) {
  if (v === null || v === undefined || !isFinite(v)) return "";
  const a = Math.abs(v);
  for (const [n, unit] of SI) if (a >= n) return `${+(v / n).toPrecision(3)}${unit}${bytes ? "B" : ""}`;
  if (a !== 0 && a < 1e-3) return v.toExponential(1).replace(".0e", "e");
  return String(+v.toPrecision(4));
}

// The y axis as wide as its longest label (12px digits: about 8px a character, then the ticks and a gap)
const axisSize = (u, values) => Math.max(50, 20 + 8 * Math.max(0, ...(values || []).map((v) => `${v ?? ""}`.length)));

// The charts as they are drawn: a new read of the same metrics and series updates them in place, so a range the
// person zoomed into stays (double-click shows all again) and what they hover over does not flicker away
function sameCharts(charts, cells, x) {
  return charts.length === cells.length && charts.every((c, i) => c.tyKey === chartKey(cells[i][1], cells[i][2], x));
}
const chartKey = (name, series, x) => JSON.stringify([name, x, series.map((s) => s.label)]);

function update(chart, series) {
  const [x0, x1] = [chart.data[0][0], chart.data[0][chart.data[0].length - 1]];
  const { min, max } = chart.scales.x;
  const zoomed = min !== undefined && min !== null && (min > x0 || max < x1);
  chart.setData(align(series), !zoomed);
}

// One chart per metric name of `points` (MetricPoint[]), one series per key(point) with label(key);
// `x` is "step" or "time". Replaces the children of `box`; returns the charts.
// `previous`: the charts this box holds, updated in place when the metrics and series are the same (else destroyed).
export async function metricCharts(box, points, { x = "step", key = (p) => `r${p.replica}`, label = (k) => k,
  previous = [] } = {}) {
  const byName = new Map();
  for (const p of points) {
    const xv = x === "time" ? p.ts : p.step;
    if (xv === null || xv === undefined) continue;
    if (!byName.has(p.name)) byName.set(p.name, new Map());
    const bySeries = byName.get(p.name);
    const k = key(p);
    if (!bySeries.has(k)) bySeries.set(k, []);
    bySeries.get(k).push([xv, p.value]);
  }
  const charts = [];
  const cells = [];
  for (const [name, bySeries] of [...byName].sort((a, b) => a[0].localeCompare(b[0]))) {
    const series = [...bySeries].map(([k, pts]) => {
      pts.sort((a, b) => a[0] - b[0]);
      return { label: label(k), xs: pts.map((p) => p[0]), ys: pts.map((p) => p[1]) };
    });
    const cell = h("div.chart", { dataset: { metric: name } });
    cells.push([cell, name, series]);
  }
  if (cells.length && sameCharts(previous, cells, x)) {
    previous.forEach((chart, i) => update(chart, cells[i][2]));
    return previous;
  }
  previous.forEach((c) => c.destroy());
  box.replaceChildren(...cells.map((c) => c[0]));
  if (!cells.length) box.append(h("p.muted", {}, x === "step" && points.length ? "No metric has a step: switch x to time." : "No metrics logged."));
  for (const [cell, name, series] of cells) {
    const chart = await lineChart(cell, { title: name, series, time: x === "time" });
    chart.tyKey = chartKey(name, series, x);
    charts.push(chart);
  }
  return charts;
}
