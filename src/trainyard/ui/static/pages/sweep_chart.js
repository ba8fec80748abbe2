// A sweep's optimization history: each completed trial's value by trial number as a point, the best so far
// as a step line, and the pruned trials' last values as fainter points. Drawn with uPlot (see chart.js).
import { align, loadUPlot } from "../chart.js";
import { h } from "../ui.js";

// trial numbers are whole: ticks never fall between two
const TRIAL_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4];
const COMPLETE = "#2f6fde";
const BEST = "#1a7f37";
const PRUNED = "rgba(154, 103, 0, 0.45)";

// What the chart shows of `trials` for the metric's goal, each series as [[number, value], …] by number:
// completed trials' values (`points`), the best of them so far (`best`) and pruned trials' last values.
export function history(trials, goal) {
  const better = goal === "minimize" ? Math.min : Math.max;
  const valued = (state) => trials.filter((t) => t.state === state && t.value !== null && t.value !== undefined)
    .sort((a, b) => a.number - b.number).map((t) => [t.number, t.value]);
  const points = valued("complete");
  let best = null;
  return {
    points,
    best: points.map(([n, v]) => [n, (best = best === null ? v : better(best, v))]),
    pruned: valued("pruned"),
  };
}

// The chart of one sweep: `el` to place on the page (hidden until a trial completes); update(trials, metric)
// redraws only when what it shows changed; destroy() when the page goes. `format` writes a value.
export class HistoryChart {
  constructor(format = String) {
    this.format = format;
    this.box = h("div.panel");
    this.el = h("div.sweep-history", { hidden: true }, h("h2", null, "Optimization history"), this.box);
    this.plot = null;
    this.shown = "";
  }

  async update(trials, metric) {
    const data = history(trials, metric.goal);
    const sig = JSON.stringify(data);
    if (sig === this.shown) return;
    this.shown = sig;
    Object.assign(this.el.dataset, { points: JSON.stringify(data.points), best: JSON.stringify(data.best) });
    this.el.hidden = !data.points.length;
    if (!data.points.length) return this.drop();
    const uPlot = await loadUPlot();
    if (this.shown !== sig) return;  // a newer update came while uPlot loaded (it draws), or the page went
    // the line first, so that the points are drawn over it
    const series = [data.best, data.points, ...(data.pruned.length ? [data.pruned] : [])]
      .map((pts) => ({ xs: pts.map((p) => p[0]), ys: pts.map((p) => p[1]) }));
    // the same series again (more trials, new values): the chart takes the new data; else it is drawn anew
    if (this.plot && this.plot.series.length === series.length + 1) return this.plot.setData(align(series));
    this.drop();
    this.plot = new uPlot(this.options(uPlot, metric, series.length > 2), align(series), this.box);
  }

  options(uPlot, metric, withPruned) {
    const value = (u, v) => (v === null || v === undefined ? "–" : this.format(v));
    const dots = (label, color, size) => ({ label, stroke: color, fill: color, value, paths: () => null,
      points: { show: true, size, space: 0, fill: color, stroke: color } });
    return {
      width: this.box.clientWidth ? Math.max(300, this.box.clientWidth - 28) : 600,  // less the panel's padding
      height: 240,
      scales: { x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] } },
      series: [
        { label: "trial", value: (u, v) => (v === null || v === undefined ? "–" : String(v)) },
        { label: "best so far", stroke: BEST, width: 2, value, spanGaps: true, paths: uPlot.paths.stepped({ align: 1 }),
          points: { show: false } },
        dots(metric.name, COMPLETE, 8),
        ...(withPruned ? [dots("pruned", PRUNED, 7)] : []),
      ],
      axes: [{ label: "trial", incrs: TRIAL_INCRS }, { label: metric.name, size: 60 }],
      cursor: { drag: { x: true, y: false } },
    };
  }

  destroy() {
    this.shown = null;
    this.drop();
  }

  drop() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}
