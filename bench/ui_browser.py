"""The web UI in a real browser: how soon a log line reaches an open job page, and how long a chart of
100,000 points takes to draw.

    PYTHONPATH=src:bench .venv/bin/python bench/ui_browser.py [--lines 40] [--points 100000]

Starts its own trainyard server in a temporary TRAINYARD_HOME and Debian's Chromium (/usr/bin/chromium,
through Playwright). (a) A job prints a line with its wall time every 200 ms; the job page, open while it
runs, records with a MutationObserver when each line first shows on screen; latency = that moment less
the time in the line (same machine, same clock). Baseline, in the same run: the SDK's
``logs(follow=True)`` reading the same lines. Target: median < 1 s. (b) The page's own chart.js draws a
series of ``--points`` points with uPlot, timed in the browser up to the next frame; baseline: the same
points stroked as one path on a bare canvas. Target: < 500 ms. Prints PASS/MISS; exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

from benchserver import BenchServer

LATENCY_TARGET, CHART_TARGET = 1.0, 0.5
CHROMIUM = "/usr/bin/chromium"

JOB = """
import time
time.sleep(3)  # the page and the SDK's reader are open before the first line
for i in range({n}):
    print(f"TS {{time.time():.6f}} line {{i}}", flush=True)
    time.sleep(0.2)
"""

# every line seen on screen, once: its text and when (Unix ms, the same clock as the job's time.time())
OBSERVE = """() => {
  window.__seen = {};
  window.__t0 = (performance.timeOrigin + performance.now()) / 1000;
  const note = () => {
    const now = performance.timeOrigin + performance.now();
    for (const row of document.querySelectorAll('.log-line')) {
      const m = row.textContent.match(/TS (\\d+\\.\\d+) line (\\d+)/);
      if (m && !(m[2] in window.__seen)) window.__seen[m[2]] = [now / 1000 - parseFloat(m[1]), parseFloat(m[1])];
    }
  };
  new MutationObserver(note).observe(document.querySelector('.logview'), {childList: true, subtree: true, characterData: true});
}"""

CHART = """async (n) => {
  const { lineChart, loadUPlot } = await import('/ui/chart.js');
  await loadUPlot();
  const xs = new Array(n), ys = new Array(n);
  for (let i = 0; i < n; i++) { xs[i] = i; ys[i] = Math.sin(i / 500) + Math.random() * 0.1; }
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const out = { chart: [], canvas: [] };
  for (let k = 0; k < 5; k++) {
    const el = document.createElement('div'); el.style.width = '900px'; document.body.append(el);
    let t0 = performance.now();
    const u = await lineChart(el, { title: 'bench', series: [{ label: 'y', xs, ys }], width: 900, height: 300 });
    await frame();
    out.chart.push(performance.now() - t0);
    u.destroy(); el.remove();
    const c = document.createElement('canvas'); c.width = 900; c.height = 300; document.body.append(c);
    t0 = performance.now();
    const g = c.getContext('2d');
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < n; i++) { if (ys[i] < lo) lo = ys[i]; if (ys[i] > hi) hi = ys[i]; }
    g.beginPath();
    for (let i = 0; i < n; i++) g.lineTo((i / n) * 900, 300 - ((ys[i] - lo) / (hi - lo)) * 300);
    g.stroke();
    await frame();
    out.canvas.push(performance.now() - t0);
    c.remove();
  }
  return out;
}"""


def sdk_reader(server: BenchServer, job_id: str, seen: dict[str, float]) -> None:
    buf = ""
    for chunk in server.client.logs(job_id, follow=True):
        now = time.time()
        buf += chunk.data
        *lines, buf = buf.split("\n")
        for line in lines:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "TS":
                seen.setdefault(parts[3], now - float(parts[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=40)
    ap.add_argument("--points", type=int, default=100_000)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install chromium)")
        return 2
    with tempfile.TemporaryDirectory(prefix="trainyard-bench-ui-") as tmp:
        server = BenchServer(Path(tmp) / "home")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                job = server.client.submit({"name": "ticker", "command": [sys.executable, "-c", JOB.format(n=args.lines)]})
                sdk_seen: dict[str, float] = {}
                reader = threading.Thread(target=sdk_reader, args=(server, job.id, sdk_seen), daemon=True)
                reader.start()
                token = (Path(tmp) / "home" / "token").read_text().strip()
                page.goto(f"{server.url}/jobs/{job.id}#token={quote(token, safe='')}")
                page.click("dialog.link-signin button[value=confirm]")  # a link's token is kept once confirmed
                page.wait_for_selector(".logview")
                page.evaluate(OBSERVE)
                job.wait(timeout=120)
                page.wait_for_function(f"Object.keys(window.__seen).length >= {args.lines}", timeout=30_000)
                ui_seen, t0 = page.evaluate("[window.__seen, window.__t0]")
                reader.join(30)
                timings = page.evaluate(CHART, args.points)
                browser.close()
        finally:
            server.close()
    if errors:
        print("errors in the page:", errors)
    # only lines printed after the observer was in place: one printed before shows up late by construction
    ui = [lat for lat, ts in ui_seen.values() if ts > t0]
    sdk = list(sdk_seen.values())
    ui_med, sdk_med = statistics.median(ui), statistics.median(sdk) if sdk else float("nan")
    print(f"(a) log line → browser: {len(ui)} lines, median {ui_med * 1000:.0f} ms, p90 "
          f"{statistics.quantiles(ui, n=10)[-1] * 1000:.0f} ms, max {max(ui) * 1000:.0f} ms")
    print(f"    baseline SDK logs(follow=True): {len(sdk)} lines, median {sdk_med * 1000:.0f} ms;"
          f" browser / SDK = {ui_med / sdk_med:.2f}x")
    print(f"    target median < {LATENCY_TARGET:.0f} s over ≥ 20 lines: "
          f"{'PASS' if ui_med < LATENCY_TARGET and len(ui) >= 20 else 'MISS'}")
    chart, canvas = statistics.median(timings["chart"]), statistics.median(timings["canvas"])
    print(f"(b) chart of {args.points:,} points (chart.js + uPlot): median {chart:.0f} ms of 5 "
          f"({', '.join(f'{t:.0f}' for t in timings['chart'])})")
    print(f"    baseline bare canvas path: median {canvas:.0f} ms; chart / canvas = {chart / canvas:.2f}x")
    print(f"    target < {CHART_TARGET * 1000:.0f} ms: {'PASS' if chart < CHART_TARGET * 1000 else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
