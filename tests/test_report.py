"""`schedlab report`: figure files, one self-contained HTML file, rendered for real in headless
Chromium (Debian's chromium package, installed by `make setup`)."""

from __future__ import annotations

import html as html_lib
import importlib
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import schedlab
from conftest import ROOT, SCHEDLAB, cli_env
from schedlab import experiment as ex
from schedlab import profile, worlds
from schedlab.report import (
    class_shares,
    make_report,
    noisy_runs,
    report_context,
    report_text,
    unprecise_runs,
    world_gap,
)
from schedlab.summary_rows import significant

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]

# Everything at once: a sweep, classes, a closed workload with tasks (shares), two CPUs, and
# small runs with their schedules for the Gantt chart.
SMALL = {
    "experiment": {"name": "report-test", "replications": 2, "seed": 3, "keep_jobs": True,
                   "keep_schedule": "first", "load_sample": 5,
                   "description": "Every plot at once."},
    "workload": {"think": "exp:4", "size": "exp:1", "jobs": 60,
                 "classes": [{"name": "gold", "tickets": 3, "clients": 2},
                             {"name": "lead", "tickets": 1, "clients": 2}]},
    # Per-CPU runqueues with a balancer: the balance plot (time to balance) has data too.
    "machine": {"cpus": 2, "runqueues": "per-cpu", "balancer": "linux"},
    "policy": [{"name": "lottery", "quantum": 0.5}, {"name": "stride", "quantum": 0.5},
               {"name": "fcfs"}],
    "sweep": {"workload.think": ["exp:2", "exp:4"]},
    # Every plot named, those drawn only on request among them.
    "report": {"gantt_max_segments": 1000, "plots": list(ex.PLOTS)},
}


def run_world(spec: dict) -> schedlab.Result:
    """A stand-in 'server' world for the side-by-side test: the simulator with a switch cost,
    so its numbers differ from the sim world's. With NOISY set, its runs at load 0.6 carry
    the noise gate's flag as a real world's would."""
    r = schedlab.simulate(**{**spec, "context_switch": 0.05})
    if NO_SIZES:
        r.jobs["size"] = math.nan
    if NOISY:
        flagged = spec.get("load") == 0.6
        why = ("others used 25.0% of the run's CPUs (threshold 10%, beyond /proc/stat's "
               "resolution of 20 ms)")
        r.summary.update(noisy=flagged, foreign_fraction=0.25 if flagged else 0.01,
                         steal_fraction=0.0, noise_reasons=[why] * flagged)
    return r


NOISY = False
NO_SIZES = False  # the stand-in's jobs without a size, as a server's without an emulated cost


run = run_world  # the world protocol: module.run(spec) -> Result


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "small"
    schedlab.run(SMALL, out=out)
    return out, make_report(out)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is missing: `make setup` installs it (sysdeps)"
    return exe


def render(html: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               *args, html.resolve().as_uri()],
                              capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------------------------
# Geometry of the page as Chromium lays it out
# ---------------------------------------------------------------------------------------------

# Run in the page (a copy of the report with this script at its end): the boxes, in CSS pixels
# of the page, of every legend, legend swatch, data mark (lines, markers, bars, bands: the ids
# tag_figure gives them, each drawn element clipped to its axes) and axis label of every
# figure; written as JSON into a hidden element that --dump-dom prints.
GEOMETRY_JS = r"""
(() => {
  const MARKS = ["data-", "theory-", "warmup-end"];
  const DRAWN = "path, use, rect, polygon, polyline, line, circle, ellipse";
  const box = r => ({x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height});
  const leaves = g => [...g.querySelectorAll(DRAWN)].filter(e => !e.closest("defs"));
  function clipBox(el) {  // the axes a mark is clipped to, in page pixels
    const holder = el.closest("[clip-path]");
    const m = holder && /url\(#([^)]+)\)/.exec(holder.getAttribute("clip-path"));
    const rect = m && document.getElementById(m[1])?.querySelector("rect");
    if (!rect) return null;
    const [x, y, w, h] = ["x", "y", "width", "height"].map(a => +rect.getAttribute(a));
    const ctm = holder.getScreenCTM();
    const p = [[x, y], [x + w, y], [x, y + h], [x + w, y + h]]
      .map(([a, b]) => new DOMPoint(a, b).matrixTransform(ctm));
    const xs = p.map(q => q.x + scrollX), ys = p.map(q => q.y + scrollY);
    return {x: Math.min(...xs), y: Math.min(...ys),
            w: Math.max(...xs) - Math.min(...xs), h: Math.max(...ys) - Math.min(...ys)};
  }
  function meet(a, b) {
    const x = Math.max(a.x, b.x), y = Math.max(a.y, b.y);
    const w = Math.min(a.x + a.w, b.x + b.w) - x, h = Math.min(a.y + a.h, b.y + b.h) - y;
    return w > 0 && h > 0 ? {x, y, w, h} : null;
  }
  function paint(el) {  // stroke or fill colour, its opacity, the stroke width in pixels
    const cs = getComputedStyle(el);
    let alpha = 1;
    for (let e = el; e && e.tagName !== "svg"; e = e.parentElement)
      alpha *= +getComputedStyle(e).opacity;
    const scale = Math.abs(el.getScreenCTM()?.a || 1);
    const sw = cs.stroke !== "none" ? parseFloat(cs.strokeWidth) * scale : 0;
    const stroked = sw > 0 && +cs.strokeOpacity > 0;
    const colour = stroked ? cs.stroke : cs.fill;
    const rgb = (colour.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
    const own = stroked ? +cs.strokeOpacity : +cs.fillOpacity;
    return {rgb, alpha: alpha * own, sw, painted: colour !== "none" && rgb.length === 3};
  }
  function hit(el, r) {  // is the element on top somewhere in its box?
    for (let i = 0; i < 7; i++) for (let j = 0; j < 3; j++) {
      const x = r.x - scrollX + r.w * (i + 0.5) / 7, y = r.y - scrollY + r.h * (j + 0.5) / 3;
      const top = document.elementFromPoint(x, y);
      if (top && (top === el || el.contains(top))) return true;
    }
    return false;
  }
  scrollTo(0, 0);
  const figures = [...document.querySelectorAll("figure[data-plot]")].map(fig => {
    const svg = fig.querySelector("svg.plot");
    const marks = [];
    for (const g of svg.querySelectorAll("[id]")) {
      if (!MARKS.some(p => g.id.startsWith(p))) continue;
      const rects = [];
      for (const el of leaves(g)) {
        const r = box(el.getBoundingClientRect()), pad = Math.max(paint(el).sw / 2, 0.5);
        const grown = {x: r.x - pad, y: r.y - pad, w: r.w + 2 * pad, h: r.h + 2 * pad};
        const clip = clipBox(el);
        const seen = clip ? meet(grown, clip) : grown;
        if (seen) rects.push(seen);
      }
      marks.push({id: g.id, rects});
    }
    const legends = [...svg.querySelectorAll('[id^="legend-"]')].map(g => ({
      id: g.id, box: box(g.getBoundingClientRect()),
      entries: g.querySelectorAll('[id^="legendtext-"]').length,
      swatches: [...g.querySelectorAll('[id^="swatch-"]')].map(s => {
        const r = box(s.getBoundingClientRect());
        const p = leaves(s).map(paint).find(q => q.painted) || {rgb: [], alpha: 0, sw: 0};
        return {id: s.id, box: r, rgb: p.rgb, alpha: p.alpha, sw: p.sw,
                area: (r.w + p.sw) * (r.h + p.sw)};
      }),
    }));
    const labels = [...svg.querySelectorAll('[id^="axislabel-"]')]
      .map(t => ({id: t.id, text: t.textContent.trim()}));
    return {plot: fig.dataset.plot, svg: box(svg.getBoundingClientRect()), marks, legends,
            labels};
  });
  // Hit tests scroll each swatch into view: elementFromPoint sees only the viewport.
  for (const f of figures) for (const l of f.legends) for (const s of l.swatches) {
    const el = document.getElementById(s.id);
    el.scrollIntoView({block: "center"});
    s.hit = hit(el, box(el.getBoundingClientRect()));
  }
  scrollTo(0, 0);
  const out = document.createElement("pre");
  out.id = "geometry";
  out.hidden = true;
  out.textContent = JSON.stringify({width: innerWidth,
                                    height: document.documentElement.scrollHeight, figures});
  document.body.appendChild(out);
})();
"""

WIDTH = 1400  # CSS pixels of the window (scale factor 1): the screenshots' width
# An axis label ends in its unit: "(ms)", "(jobs/ms)", "(ratio; 1 = fair)", "(% of it)".
UNITS = {"ms", "jobs/ms", "ratio", "count", "jobs", "%", "name", "bytes", "per"}


def geometry(html: Path, tmp: Path, screenshot: Path | None = None,
             height: int = 1000) -> dict:
    """The page's geometry (GEOMETRY_JS) as Chromium lays out a copy of the report, with a
    screenshot of the whole window when asked (the same layout: same width, no scrollbar)."""
    page = tmp / f"geometry-{html.stem}.html"
    text = html.read_text()
    assert "<script" not in text  # the report itself has none: the test adds its own
    page.write_text(text.replace("</body>", f"<script>{GEOMETRY_JS}</script></body>"))
    args = ["--dump-dom", "--hide-scrollbars", "--force-device-scale-factor=1",
            f"--window-size={WIDTH},{height}"]
    if screenshot is not None:
        args.append(f"--screenshot={screenshot}")
    r = render(page, *args)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="geometry" hidden="">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    return json.loads(html_lib.unescape(m[1]))


def check_geometry(geo: dict, time_unit: str = "ms") -> dict[str, int]:
    """The rules of every figure, by geometry: no legend box over a drawn mark, each legend
    inside its figure with one visible swatch per entry, every axis label with its unit (a
    time in the experiment's `time_unit`). Returns the number of legends of each plot."""
    units = UNITS | {time_unit, f"jobs/{time_unit}"}
    if time_unit != "ms":
        units -= {"ms", "jobs/ms"}
    assert geo["width"] == WIDTH
    legends = {}
    for fig in geo["figures"]:
        plot, svg = fig["plot"], fig["svg"]
        assert svg["w"] > 300 and svg["h"] > 150, (plot, svg)
        ids = [m["id"] for m in fig["marks"] for _ in m["rects"]]
        rects = np.array([[r["x"], r["y"], r["x"] + r["w"], r["y"] + r["h"]]
                          for m in fig["marks"] for r in m["rects"]]).reshape(-1, 4)
        assert len(rects) >= 3, (plot, fig["marks"])  # it draws something, found by its ids
        for leg in fig["legends"]:
            b = leg["box"]
            # Whole, inside its figure (not cut off), and over no mark of it.
            assert b["w"] > 20 and b["h"] > 8, (plot, leg["id"], b)
            assert b["x"] >= svg["x"] - 1 and b["x"] + b["w"] <= svg["x"] + svg["w"] + 1, (plot, b)
            assert b["y"] >= svg["y"] - 1 and b["y"] + b["h"] <= svg["y"] + svg["h"] + 1, (plot, b)
            w = np.minimum(rects[:, 2], b["x"] + b["w"]) - np.maximum(rects[:, 0], b["x"])
            h = np.minimum(rects[:, 3], b["y"] + b["h"]) - np.maximum(rects[:, 1], b["y"])
            area = np.clip(w, 0, None) * np.clip(h, 0, None)  # of each mark under the legend
            over = [(ids[i], float(area[i])) for i in np.flatnonzero(area > 0.5)]
            assert not over, (plot, leg["id"], b, over[:5])
            assert leg["entries"] >= 1 and len(leg["swatches"]) == leg["entries"], (plot, leg)
            for sw in leg["swatches"]:
                # A visible swatch: some area, painted on top, in a colour that is not the
                # page's white (distance over the three channels, after its opacity).
                assert sw["area"] >= 6, (plot, sw)
                assert sw["hit"], (plot, sw)
                assert len(sw["rgb"]) == 3 and sw["alpha"] >= 0.3, (plot, sw)
                ink = sw["alpha"] * sum(255 - c for c in sw["rgb"])
                assert ink >= 60, (plot, sw)
        legends[plot] = len(fig["legends"])
        for label in fig["labels"]:
            unit = re.search(r"\(([^()]+)\)", label["text"])
            assert unit, (plot, label)
            head = re.split(r"[;, ]", unit[1].strip())[0]
            assert head in units, (plot, label)
    return legends


def check_screenshot(shot: Path, geo: dict) -> None:
    """The screenshot is the page and not blank; each legend swatch shows its colour."""
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (geo["height"], WIDTH), img.shape
    ink = (np.abs(img - 255).sum(axis=2) > 60).mean()  # share of pixels that are not white
    bins = img // 32  # 8 levels a channel
    colours = len(np.unique(bins[..., 0] * 64 + bins[..., 1] * 8 + bins[..., 2]))
    assert ink > 0.02, ink
    assert colours >= 12, colours  # plot colours, not just text
    for fig in geo["figures"]:
        for leg in fig["legends"]:
            for sw in leg["swatches"]:
                b, pad = sw["box"], 1 + sw["sw"] / 2
                x0, y0 = int(b["x"] - pad), int(b["y"] - pad)
                x1 = math.ceil(b["x"] + b["w"] + pad)
                y1 = math.ceil(b["y"] + b["h"] + pad)
                patch = img[max(y0, 0):y1 + 1, max(x0, 0):x1 + 1].reshape(-1, 3)
                want = sw["alpha"] * np.array(sw["rgb"]) + (1 - sw["alpha"]) * 255
                near = (np.abs(patch - want).sum(axis=1) <= 90).sum()
                assert near >= 3, (fig["plot"], sw["id"], want.tolist(), near)


def test_report_writes_figures_and_one_self_contained_html(small):
    out, html = small
    assert html == out / "report.html"
    for name in ex.PLOTS:
        png, svg = out / "report" / f"{name}.png", out / "report" / f"{name}.svg"
        assert png.stat().st_size > 5000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert "<svg" in svg.read_text()[:2000], name
    text = html.read_text()
    # Self-contained and offline: no script, no external reference of any kind.
    assert "<script" not in text
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", text)
    bare = re.sub(r'xmlns(:\w+)?="[^"]*"', "", text)  # namespace names are never fetched
    assert "http://" not in bare and "https://" not in bare
    figures = re.findall(r'<figure class="figure" data-plot="(\w+)">(.*?)</figure>', text, re.S)
    assert [f[0] for f in figures] == list(ex.PLOTS)
    for name, body in figures:
        assert body.count("<path") >= 5, name
    assert "Not drawn" not in text


def test_chromium_draws_every_plot(small):
    _, html = small
    r = render(html, "--dump-dom")
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    plots = re.findall(r'<svg class="plot".*?</svg>', dom, re.S)
    assert len(plots) == len(ex.PLOTS)
    for svg in plots:
        assert len(re.findall(r"<path[^>]* d=\"M", svg)) >= 5


def test_chromium_screenshot_is_not_blank(small, tmp_path):
    from PIL import Image

    _, html = small
    shot = tmp_path / "shot.png"
    r = render(html, f"--screenshot={shot}", "--window-size=1100,2400",
               "--hide-scrollbars")
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (2400, 1100)
    ink = (np.abs(img - 255).sum(axis=2) > 60).mean()  # share of pixels that are not white
    colours = len(np.unique(img.reshape(-1, 3) // 32, axis=0))
    assert ink > 0.03, ink
    assert colours >= 12, colours  # plot colours, not just text


def test_legends_never_cover_data_and_every_axis_has_its_unit(small, tmp_path):
    _, html = small
    geo = geometry(html, tmp_path)
    assert [f["plot"] for f in geo["figures"]] == list(ex.PLOTS)
    legends = check_geometry(geo)
    # Every figure that names series has one legend, beside or below its axes; the classes
    # plot names its bars on the axis.
    for plot in ("response", "percentiles", "throughput", "fairness", "share", "cdf", "load",
                 "load_series"):
        assert legends[plot] == 1, (plot, legends)
    assert legends["classes"] == 0
    swatches = {f["plot"]: [len(leg["swatches"]) for leg in f["legends"]]
                for f in geo["figures"]}
    assert swatches["load"] == [3]  # Lottery, Stride, FCFS: one swatch each
    assert swatches["share"] == [4]  # the three policies and the line share = entitlement
    labels = [lab["text"] for f in geo["figures"] for lab in f["labels"]]
    for text in ("mean response time (ms)", "throughput (jobs/ms)", "p99 response time (ms)",
                 "Jain's index (ratio; 1 = fair)", "measured CPU share (ratio)",
                 "utilisation (ratio)", "response time (ms)", "time (ms)"):
        assert text in labels, (text, labels)
    assert len(labels) >= 20


def test_the_geometry_checks_fail_on_what_they_must_catch(tmp_path):
    """The checks above are not vacuous: the load chart as it was (its legend on the bars,
    RR's green swatch on RR's green bar), an axis label without a unit, and a legend entry
    without a visible swatch each fail them."""
    import io

    import matplotlib
    from matplotlib.figure import Figure
    from schedlab.report import _inline_svg
    from schedlab.report.plots import STYLE, tag_figure

    def page_figure(name: str, draw) -> str:
        buf = io.StringIO()
        with matplotlib.rc_context(STYLE):  # as the report draws (its text as SVG text)
            fig = Figure(figsize=(6, 3.5), layout="constrained")
            ax = fig.subplots()
            draw(fig, ax)
            tag_figure(fig, name)
            fig.savefig(buf, format="svg")
        return f'<figure class="figure" data-plot="{name}">{_inline_svg(buf.getvalue())}</figure>'

    def over(fig, ax):
        for i, (label, colour) in enumerate((("FCFS", "C0"), ("PS", "C1"), ("RR", "C2"))):
            ax.bar([i], [0.95], color=colour, label=label)
        ax.set_ylabel("utilisation (ratio)")
        ax.legend(loc="lower right")

    def lines(ax, *widths):
        for i, lw in enumerate(widths):
            ax.plot([1, 2, 3], [3 + i, 1 + i, 2 + i], lw=lw, label=["FCFS", "PS", "RR"][i])

    def unit(fig, ax):
        lines(ax, 1.5, 1.5, 1.5)
        ax.set_ylabel("mean response time")
        fig.legend(loc="outside right upper")

    def swatch(fig, ax):
        lines(ax, 1.5, 1.5, 0)  # RR drawn with zero width: no swatch to see
        ax.set_ylabel("mean response time (ms)")
        fig.legend(loc="outside right upper")

    figures = [page_figure("over", over), page_figure("unit", unit),
               page_figure("swatch", swatch)]
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body>" + "".join(figures) + "</body></html>")
    geo = geometry(page, tmp_path)
    found = {f["plot"]: f for f in geo["figures"]}
    assert sorted(found) == ["over", "swatch", "unit"]
    for name, needle in (("over", "data-over-0-"), ("unit", "mean response time"),
                         ("swatch", "swatch-swatch-0-2")):
        with pytest.raises(AssertionError) as caught:
            check_geometry({**geo, "figures": [found[name]]})
        assert needle in str(caught.value), (name, str(caught.value)[:500])
    # RR's swatch on RR's bar is painted on top, in its colour: only the overlap tells.
    rr = found["over"]["legends"][0]["swatches"][2]
    assert rr["hit"] and rr["area"] > 50 and rr["rgb"] == [44, 160, 44]


def test_numbers_in_the_report_are_the_results(small):
    out, html = small
    res = schedlab.load_results(out)
    text = html.read_text()
    for _, row in res.metric("response_mean").iterrows():
        assert f"{row['mean']:.4g}" in text
    # CPU shares: lottery gives gold about 3/4 of what the CPUs serve while both contend.
    tasks = res.tasks
    assert {"share", "entitled", "label"} <= set(tasks.columns)


def test_missing_data_becomes_notes_not_errors(tmp_path):
    d = {"experiment": {"name": "bare", "keep_jobs": False},
         "workload": {"load": 0.5, "size": "det:1", "jobs": 500},
         "policy": [{"name": "fcfs"}]}
    out = tmp_path / "bare"
    schedlab.run(d, out=out)
    html = make_report(out, html=tmp_path / "elsewhere" / "r.html")
    text = html.read_text()
    assert html.exists() and not (out / "report.html").exists()
    notes = re.findall(r"<li>(.*?)</li>", text)
    assert any("Gantt" in n for n in notes)
    assert any("per-task shares" in n for n in notes)
    assert any("per-job tables" in n for n in notes)
    assert text.count('<svg class="plot"') >= 3  # response, percentiles, throughput, ...


def test_the_report_from_python_is_the_commands(tmp_path):
    # `schedlab report DIR` is `schedlab.report(DIR)`: the package is called, and stays
    # callable after its submodules are imported (a function of the name would not).
    d = {"experiment": {"name": "two", "keep_jobs": False},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 500},
         "policy": [{"name": "fcfs"}, {"name": "srpt"}]}
    out = tmp_path / "two"
    res = schedlab.run(d, out=out)
    importlib.import_module("schedlab.report.plots")
    html = schedlab.report(out)
    assert html == out / "report.html"
    text = html.read_text()
    means = res.metric("response_mean")
    assert len(means) == 2
    for _, row in means.iterrows():
        assert f"{row['mean']:.4g}" in text
    cli = subprocess.run([SCHEDLAB, "report", str(out), "--html", str(tmp_path / "cli.html")],
                         capture_output=True, text=True, timeout=120, env=cli_env())
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == str(tmp_path / "cli.html")
    assert schedlab.report(out, html=tmp_path / "py.html") == tmp_path / "py.html"
    for name in ("cli.html", "py.html"):
        assert all(f"{row['mean']:.4g}" in (tmp_path / name).read_text()
                   for _, row in means.iterrows())
    with pytest.raises(schedlab.SpecError, match=r"^results = "):
        schedlab.report(tmp_path / "none")
    # A notebook's own plots go on as they were: the report draws in its own style on figures
    # of its own, and neither `import *` nor a report switches the backend or a setting.
    code = ("import matplotlib\nmatplotlib.use('svg')\nmatplotlib.rcParams['font.size'] = 13\n"
            "from schedlab import *\nimport schedlab\n"
            f"schedlab.report({str(out)!r}, html={str(tmp_path / 'nb.html')!r})\n"
            "print(matplotlib.get_backend(), matplotlib.rcParams['font.size'])\n")
    nb = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=120, env=cli_env())
    assert nb.stdout.split() == ["svg", "13.0"], nb.stderr[-2000:]
    svg = (out / "report" / "response.svg").read_text()
    assert "font-size: 9px" in svg and "font-size: 13px" not in svg  # the report's own 9 pt


def test_the_text_report_prints_the_pages_tables_and_writes_nothing(tmp_path):
    # `schedlab report DIR --text` (and report(DIR, text=True)): the response-time table of
    # the page, cell for cell, on stdout; no figure, no file. FCFS and SRPT at load 0.5 on
    # exp:1: M/M/1's 2 ms beside FCFS's mean (Schrage-Miller's 1.44 beside SRPT's).
    d = {"experiment": {"name": "two-text", "keep_jobs": False, "replications": 3},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 20_000},
         "policy": [{"name": "fcfs"}, {"name": "srpt"}]}
    out = tmp_path / "two"
    res = schedlab.run(d, out=out)
    before = sorted(p.name for p in out.iterdir())
    cli = subprocess.run([SCHEDLAB, "report", str(out), "--text"], capture_output=True,
                         text=True, timeout=120, env=cli_env())
    assert cli.returncode == 0, cli.stderr
    assert sorted(p.name for p in out.iterdir()) == before  # no report.html, no report/
    text = cli.stdout
    assert text == schedlab.report(out, text=True)
    assert text.startswith("two-text\n") and "Response time" in text
    lines = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
             for line in text.splitlines() if line.startswith("│") and "replications" in line}
    for _, row in res.metric("response_mean").iterrows():
        cells = lines[row["label"]]
        assert cells[1] == significant(row["mean"])
        assert cells[2] == f"[{significant(row['ci_low'])}, {significant(row['ci_high'])}]"
        assert cells[3] == str(row["n"]) == "3"
        assert cells[5] == significant(row["theory"])
    assert lines["FCFS"][5] == "2" and lines["SRPT"][5] == significant(
        schedlab.theory.mean_response("srpt", "exp:2", "exp:1"))
    with pytest.raises(schedlab.SpecError, match=r"^html = .*nothing beside text = true"):
        schedlab.report(out, html=tmp_path / "r.html", text=True)
    with pytest.raises(schedlab.SpecError, match=r'^text = "yes": expected true or false'):
        schedlab.report(out, text="yes")
    assert not (tmp_path / "r.html").exists()


def test_two_worlds_plot_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    d = {"experiment": {"name": "worlds", "world": ["sim", "server"], "replications": 2},
         "workload": {"load": 0.6, "size": "exp:1", "jobs": 3000},
         "policy": [{"name": "fcfs"}, {"name": "ps"}],
         "sweep": {"workload.load": [0.3, 0.6]}}
    out = tmp_path / "w"
    res = schedlab.run(d, out=out)
    assert list(dict.fromkeys(res.summaries["world"])) == ["sim", "server"]
    m = res.metric("response_mean").set_index(["world", "point", "label"])
    # Same seeds in both worlds; the stand-in adds a switch cost, so FCFS is slower there.
    assert m.loc[("server", 1, "FCFS"), "mean"] > m.loc[("sim", 1, "FCFS"), "mean"]
    text = make_report(out).read_text()
    assert "FCFS [server]" in text and "FCFS [sim]" in text


def test_intervals_of_runs_too_short_to_trust_are_marked(tmp_path, monkeypatch):
    # One replication of 300 jobs at load 0.9: too short to find uncorrelated batches
    # (ci_uncorrelated false), so its own intervals are marked wherever they are shown, and
    # the overlap of two such intervals too; three replications give trusted t intervals.
    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    d = {"experiment": {"name": "short", "world": ["sim", "server"], "replications": 1},
         "workload": {"load": 0.9, "size": "exp:1", "jobs": 300},
         "policy": [{"name": "fcfs"}]}
    out = tmp_path / "short"
    res = schedlab.run(d, out=out)
    assert not res.summaries["ci_uncorrelated"].any()
    st = res.stats.set_index(["world", "metric"])
    # The throughput has the run's own interval too now (it had none), marked as the others.
    for metric in ("response_mean", "response_p99", "wait_mean", "throughput"):
        assert not st.loc[("sim", metric), "uncorrelated"], metric
    assert st.loc[("sim", "utilization"), "uncorrelated"]  # no interval: nothing to doubt
    text = make_report(out).read_text()
    table = re.search(r'<table class="response">(.*?)</table>', text, re.S)[1]
    assert table.count("]†") >= 2  # each world's mean (and percentiles)
    assert text.count('<p class="untrusted">') == 2  # below the table and the gap table
    gap = re.search(r'<table class="gap".*?</table>', text, re.S)[0]
    assert gap.count("†") == 3  # both means and their overlap
    d["experiment"]["replications"] = 3
    out3 = tmp_path / "three"
    res3 = schedlab.run(d, out=out3)
    assert res3.stats["uncorrelated"].all()
    text3 = make_report(out3).read_text()
    assert "†" not in text3 and 'class="untrusted"' not in text3


def test_noisy_real_runs_are_named_in_a_warning(tmp_path, monkeypatch):
    # The stand-in real world's two runs at load 0.6 were flagged by the noise gate (others
    # used 25% of their CPUs): the report says so at its top, naming them; the sim world
    # has no gate, and a report without flagged runs has no warning.
    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    monkeypatch.setattr(sys.modules[__name__], "NOISY", True)
    d = {"experiment": {"name": "noisy", "world": ["sim", "server"], "replications": 2},
         "workload": {"load": 0.6, "size": "exp:1", "jobs": 500},
         "policy": [{"name": "fcfs"}], "sweep": {"workload.load": [0.3, 0.6]}}
    out = tmp_path / "noisy"
    res = schedlab.run(d, out=out)
    bad = noisy_runs(res)
    assert sorted(bad["replication"]) == [0, 1] and set(bad["point"]) == {1}
    text = make_report(out).read_text()
    warning = re.search(r'<p class="warning" id="noisy-warning">(.*?)</p>', text, re.S)[1]
    assert "2 of 4 real runs were flagged noisy" in warning
    assert ("server, FCFS, point 1, replication 0: others used 25.0% of the run&#x27;s CPUs "
            "(threshold 10%, beyond /proc/stat&#x27;s resolution of 20 ms)") in warning
    monkeypatch.setattr(sys.modules[__name__], "NOISY", False)
    quiet = tmp_path / "quiet"
    schedlab.run(d, out=quiet)
    assert "noisy-warning" not in make_report(quiet).read_text()


def test_the_gap_tables_intervals_stop_at_zero(tmp_path, monkeypatch):
    # Three replications of 10 jobs at load 0.1: the mean wait is near 0 and apart between
    # runs, so its t interval across them reaches below 0 (as in
    # test_a_sweeps_intervals_stop_at_zero). The gap table shows each world's interval as the
    # stats table has it, [0, high], not a symmetric "mean ± half-width" reaching below 0.
    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    d = {"experiment": {"name": "zero", "world": ["sim", "server"], "replications": 3,
                        "seed": 1},
         "workload": {"load": 0.1, "size": "exp:1", "jobs": 10},
         "policy": [{"name": "fcfs"}], "report": {"gap_metrics": ["wait_mean"]}}
    out = tmp_path / "zero"
    res = schedlab.run(d, out=out)
    st = res.metric("wait_mean").set_index("world")
    gap = world_gap(res, "wait_mean").iloc[0]
    for prefix, world in (("ref_", "sim"), ("", "server")):
        assert gap[prefix + "ci_low"] == st.loc[world, "ci_low"]
        assert gap[prefix + "ci_high"] == st.loc[world, "ci_high"]
    assert st.loc["sim", "mean"] - st.loc["sim", "half_width"] < 0  # the case at hand
    assert st.loc["sim", "ci_low"] == 0.0
    text = make_report(out).read_text()
    body = re.search(r'<table class="gap" data-metric="wait_mean".*?</table>', text, re.S)[0]
    cells = [html_lib.unescape(re.sub("<[^>]+>", "", c))
             for c in re.findall(r"<td>(.*?)</td>", body)]
    mean, high = st.loc["sim", "mean"], st.loc["sim", "ci_high"]
    assert cells[0].startswith(f"{mean:.4g} [0, {high:.4g}]"), cells
    assert "±" not in cells[0] and "±" not in cells[1]


def test_small_and_large_jobs_are_split_in_each_world(tmp_path, monkeypatch):
    # Each world's smallest half and largest tenth of its own jobs. A world whose jobs have
    # no size (the stand-in server, as a real server without an emulated cost) is said to
    # be left out; one split over both worlds' sizes drew it with empty groups.
    from schedlab.experiment import ReportFields
    from schedlab.report.plots import Context, classes

    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    monkeypatch.setattr(sys.modules[__name__], "NO_SIZES", True)
    d = {"experiment": {"name": "sizes", "world": ["sim", "server"], "keep_jobs": True,
                        "seed": 2},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 2000},
         "policy": [{"name": "fcfs"}]}
    res = schedlab.run(d, out=tmp_path / "sizes")
    sim = res.jobs[res.jobs["world"] == "sim"]
    assert res.jobs[res.jobs["world"] == "server"]["size"].isna().all()
    plot = classes(Context(res=res, cfg=ReportFields(), x=None, point=0))
    lo, hi = np.quantile(sim["size"], 0.5), np.quantile(sim["size"], 0.9)
    assert f"(sim: small up to {lo:.3g}, large from {hi:.3g} ms)" in plot.caption
    assert "Not shown: server, whose jobs are all of one size or have none" in plot.caption
    heights = [[p.get_height() for p in ax.patches] for ax in plot.figure.axes]
    small = sim.loc[sim["size"] <= lo, "response"].mean()
    large = sim.loc[sim["size"] >= hi, "response"].mean()
    assert heights == [[pytest.approx(small, rel=1e-12)], [pytest.approx(large, rel=1e-12)]]


def test_makespan_and_switches_side_by_side_by_hand(tmp_path, monkeypatch):
    # Ten jobs of 5 ms at once on one CPU: any work-conserving policy ends at 50 ms. Under RR
    # with a 1 ms quantum each job is taken off its CPU unfinished 4 times (40 switches); the
    # stand-in 'server' world pays 0.05 ms per dispatch of another job than the last: RR
    # dispatches 50 times (52.5 ms, +5.0%), FCFS 10 times (50.5 ms, +1.0%).
    monkeypatch.setitem(worlds.MODULES, "server", "test_report")
    d = {"experiment": {"name": "spans", "world": ["sim", "server"], "warmup": 0},
         "workload": {"clients": 10, "jobs": 10, "think": "det:0", "size": "det:5"},
         "policy": [{"name": "rr", "quantum": 1}, {"name": "fcfs"}],
         "report": {"gap_metrics": ["makespan", "context_switches"],
                    "plots": ["makespan", "context_switches"]}}
    out = tmp_path / "spans"
    res = schedlab.run(d, out=out)
    s = res.summaries.set_index(["world", "label"])
    expect = {("sim", "RR quantum=1"): (50.0, 40), ("sim", "FCFS"): (50.0, 0),
              ("server", "RR quantum=1"): (52.5, 40), ("server", "FCFS"): (50.5, 0)}
    for key, (span, switches) in expect.items():
        assert s.loc[key, "makespan"] == pytest.approx(span, abs=1e-9), key
        assert s.loc[key, "makespan"] == s.loc[key, "measure_end"] - s.loc[key, "measure_start"]
        assert s.loc[key, "context_switches"] == switches, key
    text = make_report(out).read_text()
    tables = re.findall(r'<table class="gap" data-metric="(\w+)" data-world="server" '
                        r'data-reference="sim">(.*?)</table>', text, re.S)
    assert [m for m, _ in tables] == ["makespan", "context_switches"]  # the file's order
    cells = {m: [[html_lib.unescape(re.sub("<[^>]+>", "", c)) for c in
                  re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
                 for row in re.findall(r"<tr>(.*?)</tr>", body)] for m, body in tables}
    span = cells["makespan"]
    assert span[0][1:4] == ["sim: mean [95% CI] (ms)", "server: mean [95% CI] (ms)",
                            "server − sim (ms)"]
    assert span[1][:6] == ["RR quantum=1", "50", "52.5", "2.5", "+5.0%", "–"]
    assert span[2][:6] == ["FCFS", "50", "50.5", "0.5", "+1.0%", "–"]
    switches = cells["context_switches"]
    assert switches[0][1] == "sim: mean [95% CI] (count)"
    assert switches[1][:5] == ["RR quantum=1", "40", "40", "0", "+0.0%"]
    assert switches[2][:5] == ["FCFS", "0", "0", "0", "–"]  # no relative gap from zero
    # Each table's relative gaps in a sentence (the zero-from-zero row has none).
    summaries = [html_lib.unescape(m) for m in re.findall(
        r'<p class="gap-summary" data-metric="\w+" data-world="server" '
        r'data-reference="sim">(.*?)</p>', text)]
    assert summaries == [
        "|server − sim| / sim: median 3.0%, largest 5.0% (RR quantum=1); within 5%: 2 of 2, "
        "within 10%: 2 of 2.",
        "|server − sim| / sim: median 0.0%, largest 0.0% (RR quantum=1); within 5%: 1 of 1, "
        "within 10%: 1 of 1."]
    for name in ("makespan", "context_switches"):
        assert f'<figure class="figure" data-plot="{name}">' in text
    # The default report compares the mean response alone, and draws neither plot.
    d["report"] = {}
    out2 = tmp_path / "default"
    schedlab.run(d, out=out2)
    text = make_report(out2).read_text()
    assert re.findall(r'<table class="gap" data-metric="(\w+)"', text) == ["response_mean"]
    assert 'data-plot="makespan"' not in text and 'data-plot="context_switches"' not in text


def test_class_shares_at_every_point_by_hand(tmp_path):
    # Two always-runnable tasks with tickets 3 and 1 under stride: 75% and 25% of one CPU;
    # on 2 CPUs each is capped at a CPU of its own, 50% and 50% (study 004's trap). The
    # table has every sweep point; the share plot shows one.
    d = {"experiment": {"name": "shares", "warmup": 0},
         "workload": {"think": "det:0", "size": "det:10", "jobs": 200,
                      "classes": [{"name": "gold", "tickets": 3, "clients": 1},
                                  {"name": "lead", "tickets": 1, "clients": 1}]},
         "policy": [{"name": "stride", "quantum": 1}],
         "sweep": {"machine.cpus": [1, 2]},
         "report": {"plots": ["share"]}}
    out = tmp_path / "shares"
    res = schedlab.run(d, out=out)
    per = class_shares(res)["share"]
    assert per[("sim", 0, "Stride quantum=1", "gold")] == pytest.approx(0.75, abs=1e-3)
    assert per[("sim", 1, "Stride quantum=1", "lead")] == pytest.approx(0.50, abs=1e-3)
    text = make_report(out).read_text()
    table = re.search(r'<table class="class-shares">(.*?)</table>', text, re.S)[1]
    rows = [[html_lib.unescape(re.sub("<[^>]+>", "", c)) for c in
             re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table)]
    assert rows == [
        ["machine.cpus", "policy", "world", "CPU share by class, % (entitled %)"],
        ["1", "Stride quantum=1", "sim", "gold 75.0 (75.0) · lead 25.0 (25.0)"],
        ["2", "Stride quantum=1", "sim", "gold 50.0 (50.0) · lead 50.0 (50.0)"]]
    # `--text` prints the same table: the page's sections are one list.
    printed = [[c.strip() for c in line.split("│")[1:-1]]
               for line in report_text(out).splitlines() if "· lead" in line]
    assert printed == rows[1:]
    # Without the share plot the table is not drawn either; one class alone has no table.
    d["report"] = {"plots": ["response"]}
    schedlab.run(d, out=tmp_path / "no-share")
    assert 'class="class-shares"' not in make_report(tmp_path / "no-share").read_text()
    one = {**d, "workload": {"think": "det:0", "size": "det:10", "jobs": 20, "clients": 2},
           "report": {"plots": ["share"]}}
    schedlab.run(one, out=tmp_path / "one")
    assert 'class="class-shares"' not in make_report(tmp_path / "one").read_text()


@pytest.mark.real
def test_report_cli_on_a_study(tmp_path, quick_run):
    out = quick_run(ROOT / "experiments" / "convoy" / "experiment.toml")
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "schedlab"), "report", str(out), "--html",
                        str(tmp_path / "c.html")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "c.html").read_text()
    assert 'data-plot="gantt"' in text and 'data-plot="classes"' in text
    assert 'id="worlds"' in text  # sim and server side by side, with the gap
    res = schedlab.load_results(out)
    # Median over replications (the simulator has one; the server five under --quick): a
    # scheduling hiccup of the shared machine in a run or two must not decide the comparison.
    classes = res.classes.groupby(["world", "class", "label"])["response_mean"].median()
    sim, server = classes["sim"], classes["server"]
    # The convoy: 68.9 ms for a small request behind the large ones (study: 73.7), 9.5 ms
    # when the smallest goes first (study: 11.6).
    assert sim["small", "FCFS"] == pytest.approx(68.91275, abs=1e-6)
    assert sim["small", "SFF"] == pytest.approx(9.4615, abs=1e-6)
    # The same file over real sockets (2 workers, buffer 5, emulated I/O as sleeps): SFF cuts
    # the small-file mean at least 5x while the large-file mean moves by less than 10%, and
    # each class is within 10% (+2 ms of real overhead) of the simulator.
    assert server["small", "FCFS"] / server["small", "SFF"] >= 5.0
    assert abs(server["large", "SFF"] / server["large", "FCFS"] - 1) < 0.10
    for key, value in sim.items():
        assert abs(server[key] - value) <= 0.10 * value + 2.0, (key, server[key], value)
    gap = world_gap(res)
    assert set(zip(gap["reference"], gap["world"], strict=True)) == \
        {("sim", "server"), ("calibrated", "server")} and len(gap) == 4
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "schedlab"), "report",
                        str(tmp_path / "nothing")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "manifest.json" in r.stderr
    # The file calibrates the server first: the calibrated model is within 5% of the server
    # for each class and policy, the server's own costs included, beyond what the profile's
    # own 95% intervals move it (issue 14). The small-SFF mean moves 0.3 ms for per_kib's
    # +-0.5%, a large file being 580 KiB; on 2026-12-07 its point estimate was -3.0% to
    # +6.4% off the server over 6 quiet calibrations. A profile measured on a shared machine
    # is not judged, as in test_calibration.
    prof_path = out / "profile-server.toml"
    prof = profile.load(prof_path)
    if warnings := prof["profile"].get("warnings"):
        pytest.skip(f"the calibrated model is not judged on a shared machine: {warnings}")
    calibrated = classes["calibrated"]
    moved = _calibrated_half_widths(prof, tmp_path, calibrated)
    for key, value in server.items():
        assert abs(calibrated[key] - value) <= 0.05 * value + moved[key], \
            (key, value, calibrated[key], moved[key])


def _calibrated_half_widths(prof: dict, tmp: Path, calibrated: pd.Series) -> dict:
    """How far the convoy's calibrated class means move across the profile's 95% intervals:
    each server term at its low and at its high end in turn, half the move, summed in
    quadrature (the terms' intervals, not their correlation). The file's own calibrated runs
    at the profile itself must give the experiment's calibrated means, or these are not its
    model."""
    exp = ex.load(ROOT / "experiments" / "convoy" / "experiment.toml", quick=True)
    runs = [r for r in exp.unique_runs() if r.world == "calibrated"]
    world = importlib.import_module(worlds.MODULES["calibrated"])

    def means(p: dict, name: str) -> dict:
        path = tmp / f"{name}.toml"
        profile.write(path, p)
        got = {}
        for r in runs:
            c = world.run({**r.spec, "profile": str(path)}).classes
            got |= {(k, r.label): v for k, v in zip(c["class"], c["response_mean"], strict=True)}
        return got

    at_profile = means(prof, "as-measured")
    for key, value in calibrated.items():
        assert at_profile[key] == pytest.approx(value, rel=1e-9), key
    squares = dict.fromkeys(at_profile, 0.0)
    for term, v in prof["server"].items():
        if "low" not in v or "high" not in v:
            continue
        ends = []
        for end in ("low", "high"):
            moved = {**prof, "server": {**prof["server"], term: {**v, "mean": v[end]}}}
            ends.append(means(moved, f"{term}-{end}"))
        for key in squares:
            squares[key] += ((ends[1][key] - ends[0][key]) / 2) ** 2
    return {key: math.sqrt(sq) for key, sq in squares.items()}


def test_theory_for_percentiles_intervals_of_one_run_and_the_precision_warning(tmp_path):
    # M/M/1 FCFS at load 0.7, mean size 1 ms: the response time is exponential with rate
    # mu - lambda = 0.3 per ms, so p = 1 - exp(-0.3 t) gives the theory's percentiles by hand.
    d = {"experiment": {"name": "precise", "seed": 5, "keep_jobs": True, "load_sample": 5,
                        "warmup": "auto", "precision": 0.002, "max_jobs": 6000},
         "workload": {"load": 0.7, "size": "exp:1", "jobs": 2000},
         "policy": [{"name": "fcfs"}, {"name": "srpt"}]}
    out = tmp_path / "precise"
    res = schedlab.run(d, out=out)
    st = res.stats.set_index(["label", "metric"])
    for metric, p in (("response_p50", 0.5), ("response_p95", 0.95), ("response_p99", 0.99)):
        row = st.loc[("FCFS", metric)]
        assert row["theory"] == pytest.approx(-math.log(1 - p) / 0.3, rel=1e-6), metric
        # One run, so its own interval (sectioning), which need not be symmetric.
        assert row["method"] == "sectioning" and row["n"] == 1
        assert row["ci_low"] < row["mean"] < row["ci_high"]
        assert math.isnan(st.loc[("SRPT", metric), "theory"])  # no SRPT distribution here
    assert st.loc[("FCFS", "response_mean"), "theory"] == pytest.approx(1 / 0.3, rel=1e-9)
    assert st.loc[("FCFS", "response_mean"), "method"] == "batch means"
    # 0.2% is out of reach in 6000 jobs at this load: both runs stop at their cap, and say so.
    s = res.summaries
    assert (s["jobs"] == 6000).all() and not s["precision_reached"].any()
    bad = unprecise_runs(res)
    assert sorted(bad["label"]) == ["FCFS", "SRPT"]
    assert (bad["response_mean_precision"] > 0.002).all()
    html = make_report(out).read_text()
    warning = re.search(r'<p class="warning" id="precision-warning">(.*?)</p>', html, re.S)
    assert warning and "2 runs" in warning[1] and "0.2% asked" in warning[1]
    got = s.set_index("label")["response_mean_precision"]
    assert f"{100 * got['FCFS']:.3g}% obtained" in warning[1]
    # The percentile columns of the response table carry their intervals and theory.
    table = re.search(r'<table class="response">(.*?)</table>', html, re.S)[1]
    assert "<th>p99 [95% CI] (ms)</th>" in table and "<th>mean (ms)</th>" in table
    assert f"theory {st.loc[('FCFS', 'response_p99'), 'theory']:.4g}" in table
    # Both runs found uncorrelated batches: no interval is marked as not to be trusted.
    assert s["ci_uncorrelated"].all() and "†" not in table
    # The theory's CDF (and its p95/p99 marks) beside FCFS's measured one, none for SRPT;
    # the end of the automatic warm-up on the load over time.
    cdf = re.search(r'<figure[^>]*data-plot="cdf".*?</figure>', html, re.S)[0]
    assert 'id="theory-cdf-FCFS"' in cdf and 'id="theory-tail-FCFS"' in cdf
    assert "theory-cdf-SRPT" not in cdf
    series = re.search(r'<figure[^>]*data-plot="load_series".*?</figure>', html, re.S)[0]
    assert series.count('id="warmup-end"') >= 1 and "end of the warm-up" in series


# ---------------------------------------------------------------------------------------------
# Three studies, rendered and photographed
# ---------------------------------------------------------------------------------------------

STUDIES = {"xv6": "xv6/priority.toml", "convoy": "convoy/experiment.toml",
           "rr-ps-fcfs": "rr-ps-fcfs/experiment.toml"}


def sim_only(path: Path) -> Path | dict:
    """The file, or its simulator world alone when it also names a real one (server, os):
    the same sections as a dict, relative files made absolute, other worlds' tables left out."""
    if ex.load(path, quick=True).worlds == ["sim"]:
        return path
    raw = tomllib.loads(path.read_text())
    raw["experiment"]["world"] = "sim"
    raw.pop("worlds", None)
    raw.get("quick", {}).pop("worlds", None)
    if isinstance(raw["workload"].get("trace"), str):
        raw["workload"]["trace"] = str(path.parent / raw["workload"]["trace"])
    return raw


def study_report(study: str, tmp_path: Path) -> tuple[Path, dict, Path]:
    """Runs a study --quick in the simulator, reports it, and renders the report in Chromium
    twice: to learn the page's height, then to photograph all of it."""
    out = tmp_path / study
    schedlab.run(sim_only(ROOT / "experiments" / STUDIES[study]), out=out, quick=True)
    html = make_report(out)
    height = geometry(html, tmp_path)["height"]
    shot = tmp_path / f"{study}.png"
    geo = geometry(html, tmp_path, screenshot=shot, height=height)
    assert geo["height"] == height
    return html, geo, shot


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_screenshot_of_a_study_with_the_geometry_checks(study, tmp_path):
    html, geo, shot = study_report(study, tmp_path)
    # xv6's files count in timer ticks ([experiment] unit): no axis may say ms there.
    legends = check_geometry(geo, "tick" if study == "xv6" else "ms")
    check_screenshot(shot, geo)
    figures = {f["plot"]: f for f in geo["figures"]}
    swatches = {p: [len(leg["swatches"]) for leg in f["legends"]] for p, f in figures.items()}
    text = html.read_text()
    if study == "rr-ps-fcfs":
        # Throughput is 0.04764 jobs/ms for every policy and quantum: left out, with why.
        assert list(figures) == ["response", "percentiles", "cdf", "fairness", "load"]
        flat = re.search(r'<p class="flat" data-plot="throughput">(.*?)</p>', text, re.S)
        assert flat and "jobs/ms" in flat[1], text[-3000:]
        spread = float(re.search(r"within ([\d.e-]+)% of each other", flat[1])[1])
        assert spread < 0.01
        # One CDF panel per quantum (5, 10, 20 ms), FCFS's theory in each of them.
        marks = {m["id"] for m in figures["cdf"]["marks"]}
        assert {f"theory-cdf-FCFS-p{p}" for p in range(3)} <= marks
        assert {f"theory-cdf-PS-p{p}" for p in range(3)} <= marks
        # FCFS, PS and RR in the load chart, RR's swatch as visible as the others.
        assert swatches["load"] == [3]
    elif study == "convoy":
        assert list(figures) == ["classes", "gantt", "cdf", "response", "load"]
        assert swatches["load"] == [2] and swatches["cdf"] == [2]  # FCFS and SFF
        assert legends["classes"] == 0
    else:
        assert list(figures) == ["makespan", "response", "throughput", "classes",
                                 "percentiles", "gantt", "load"]
        assert swatches["load"] == [4]  # xv6 priority, no aging, fast aging, RR
        assert swatches["response"] == swatches["makespan"] == [12]  # 4 policies x 3 traces
        assert swatches["gantt"] == [1]  # preempted
        labels = [lb["text"] for f in geo["figures"] for lb in f["labels"]]
        assert "mean response time (tick)" in labels and "time (tick)" in labels, labels
        assert "makespan (tick)" in labels, labels
    expected = {"rr-ps-fcfs": {"response": 1, "percentiles": 1, "cdf": 1, "fairness": 1,
                               "load": 1},
                "convoy": {"classes": 0, "gantt": 0, "cdf": 1, "response": 0, "load": 1},
                "xv6": {"makespan": 1, "response": 1, "throughput": 1, "classes": 0,
                        "percentiles": 1, "gantt": 1, "load": 1}}
    assert legends == expected[study]


# ---------------------------------------------------------------------------------------------
# Small multiples, near-flat measures, units
# ---------------------------------------------------------------------------------------------


def test_cdf_small_multiples_spread_over_a_long_sweep(tmp_path):
    from schedlab.report import report_context
    from schedlab.report.plots import cdf, cdf_points

    # Twelve points: nine panels (a 3 x 3 grid), the first and the last among them,
    # report.point kept; nine or fewer: every one (rr-ps-fcfs's seven quanta lost quantum 10
    # to six panels).
    assert cdf_points(3) == [0, 1, 2]
    assert cdf_points(9) == list(range(9))
    assert cdf_points(12) == [0, 1, 3, 4, 6, 7, 8, 10, 11]
    assert cdf_points(12, keep=5) == [0, 1, 3, 5, 6, 7, 8, 10, 11]
    assert cdf_points(4, keep=1, most=3) == [0, 1, 3]  # never in the first's or last's place
    assert cdf_points(40) == [0, 5, 10, 15, 20, 24, 29, 34, 39]
    loads = [0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9]
    shown = (0, 1, 3, 4, 6, 7, 8, 10, 11)
    d = {"experiment": {"name": "twelve", "seed": 4, "keep_jobs": True},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 400},
         "policy": [{"name": "fcfs"}, {"name": "ps"}],
         "sweep": {"workload.load": loads}}
    out = tmp_path / "nine"
    schedlab.run(d, out=out)
    plot = cdf(report_context(schedlab.load_results(out)))
    axes = [ax for ax in plot.figure.axes if ax.get_visible()]
    assert len(axes) == 9  # 3 rows of 3; nothing else drawn
    assert [ax.get_title(loc="left") for ax in axes] == [f"load = {loads[p]:g}" for p in shown]
    # Shared axes: the same limits in every panel, so panels compare at a glance.
    assert len({ax.get_xlim() for ax in axes}) == 1 and len({ax.get_ylim() for ax in axes}) == 1
    for ax, p in zip(axes, shown, strict=True):
        gids = {ln.get_gid() for ln in ax.lines}
        assert {f"theory-cdf-FCFS-p{p}", f"theory-cdf-PS-p{p}"} <= gids  # M/M/1 FCFS and PS
        measured = [ln for ln in ax.lines if ln.get_label() in ("FCFS", "PS")]
        assert len(measured) == 2 and all(len(ln.get_xdata()) == 400 for ln in measured)
    # Each panel is its own point: FCFS's median response grows with the load, and at load
    # 0.1 it is M/M/1's ln 2 / (1 - 0.1) = 0.770 ms (0.741 in these 400 jobs).
    medians = []
    for ax in axes:
        (fcfs,) = [ln for ln in ax.lines if ln.get_label() == "FCFS"]
        medians.append(float(np.interp(0.5, fcfs.get_ydata(), fcfs.get_xdata())))
    assert medians == sorted(medians) and medians[-1] > 4 * medians[0]
    assert medians[0] == pytest.approx(math.log(2) / 0.9, rel=0.1)
    assert "9 of the 12 points" in plot.caption
    assert "points 0, 1, 3, 4, 6, 7, 8, 10 and 11" in plot.caption
    assert len(plot.figure.legends) == 1
    assert [t.get_text() for t in plot.figure.legends[0].texts] == \
        ["FCFS", "PS", "FCFS: theory", "PS: theory"]


def test_cdf_panels_of_a_sweep_of_several_keys_are_a_grid_by_its_keys(tmp_path):
    # Two balancers x two CPU counts x seven task counts (smp-balancing/moderate.toml): six
    # panels spread over the 28 points never put linux beside windows at one point. A row per
    # (balancer, cpus), a column per task count (first, report.point's, last) do.
    from schedlab.report import report_context
    from schedlab.report.plots import cdf, cdf_grid

    moderate = [{"machine.balancer": b, "machine.cpus": c, "workload.clients": n}
                for b in ("linux", "windows") for c in (2, 4) for n in range(3, 10)]
    grid = cdf_grid(moderate, "workload.clients", keep=18)  # windows, 2 CPUs, 7 tasks
    assert grid.points == [0, 4, 6, 7, 11, 13, 14, 18, 20, 21, 25, 27]
    assert (grid.columns, grid.column_values) == (3, [3, 7, 9])
    assert grid.row_keys == ["machine.balancer", "machine.cpus"]
    # Not a full grid (a missing combination), or one key: points spread evenly.
    assert cdf_grid(moderate[:-1], "workload.clients").columns == 0
    assert cdf_grid([{"q": q} for q in range(7)], "q").points == list(range(7))
    loads = [0.2, 0.4, 0.6, 0.8]
    d = {"experiment": {"name": "grid", "seed": 4, "keep_jobs": True},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 300},
         "machine": {"cpus": 1},
         "policy": [{"name": "fcfs"}],
         "sweep": {"machine.cpus": [1, 2, 4], "workload.load": loads},
         "report": {"x": "workload.load", "point": 5}}  # 2 CPUs, load 0.4
    out = tmp_path / "grid"
    schedlab.run(d, out=out)
    plot = cdf(report_context(schedlab.load_results(out)))
    axes = [ax for ax in plot.figure.axes if ax.get_visible()]
    titles = [ax.get_title(loc="left") for ax in axes]
    assert titles == [f"cpus = {c}, load = {x:g}" for c in (1, 2, 4) for x in (0.2, 0.4, 0.8)]
    # Laid out as a grid: a column shares its load, a row its CPUs.
    columns = [round(ax.get_position().x0, 3) for ax in axes]
    rows = [round(ax.get_position().y0, 3) for ax in axes]
    assert columns[:3] == columns[3:6] == columns[6:] and len(set(columns)) == 3
    assert rows[0] == rows[1] == rows[2] > rows[3] == rows[5] > rows[6] == rows[8]
    assert "a row per cpus, a column per load (0.2, 0.4 and 0.8); 9 of the 12 points" \
        in plot.caption
    # Each panel is its own point: at load 0.8 per CPU, M/M/c waits less the more CPUs it
    # has, so the median response falls down the last column.
    medians = []
    for ax in axes[2::3]:
        (line,) = [ln for ln in ax.lines if ln.get_label() == "FCFS"]
        medians.append(float(np.interp(0.5, line.get_ydata(), line.get_xdata())))
    assert medians[0] > medians[1] > medians[2], medians


class _Stats:
    """The part of schedlab.Results a metric plot reads, from a stats table by hand."""

    def __init__(self, rows: list[tuple]):
        cols = ["world", "point", "workload.load", "label", "mean", "ci_low", "ci_high"]
        st = pd.DataFrame(rows, columns=cols)
        self.st = st.assign(half_width=(st["ci_high"] - st["ci_low"]) / 2, theory=math.nan)
        self.labels = list(dict.fromkeys(st["label"]))
        self.sweep_keys = ["workload.load"]
        self.summaries = pd.DataFrame({"world": ["sim"], "throughput": [1.0]})
        self.manifest = {"experiment": {}, "points": [{"workload.load": 0.5},
                                                      {"workload.load": 0.7}]}
        self.time_unit = "ms"

    def metric(self, name: str) -> pd.DataFrame:
        return self.st


def _ctx(rows):
    from schedlab.experiment import ReportFields
    from schedlab.report.plots import Context

    return Context(res=_Stats(rows), cfg=ReportFields(), x="workload.load", point=1)


def test_near_flat_measures_are_differences_or_left_out_with_their_numbers():
    from matplotlib.figure import Figure
    from schedlab.report.plots import _metric_axes, flatness, throughput

    def rows(a0, b0, a1, b1, half):
        return [("sim", 0, 0.5, "A", a0, a0 - half, a0 + half),
                ("sim", 0, 0.5, "B", b0, b0 - half, b0 + half),
                ("sim", 1, 0.7, "A", a1, a1 - half, a1 + half),
                ("sim", 1, 0.7, "B", b1, b1 - half, b1 + half)]

    # 0.6% apart at most, intervals of ±0.1%: near-flat, but A and B differ beyond their
    # intervals at both points. Drawn as differences from the policies' mean, in %.
    apart = rows(1.000, 1.004, 1.002, 1.006, 0.001)
    f = flatness(_Stats(apart).st)
    assert f is not None and f.apart == 2 and f.spread == pytest.approx(0.006 / 1.003, rel=1e-9)
    ax = Figure().subplots()
    d = _metric_axes(_ctx(apart), ax, "throughput")
    assert d.how == "relative"
    a, b = (ln for ln in ax.lines if ln.get_label() in ("A", "B"))
    assert a.get_ydata() == pytest.approx([-100 * 0.002 / 1.002, -100 * 0.002 / 1.004])
    assert b.get_ydata() == pytest.approx([100 * 0.002 / 1.002, 100 * 0.002 / 1.004])
    assert ax.get_ylabel() == "throughput − mean of the policies (% of it)"
    # The same means with intervals of ±1%: every policy within its interval of the others.
    # Left out, the reason and the numbers written in its place.
    inside = rows(1.000, 1.004, 1.002, 1.006, 0.01)
    assert flatness(_Stats(inside).st).apart == 0
    plot = throughput(_ctx(inside))
    assert plot.figure is None and plot.note is None
    assert "within 0.6% of each other: 1 to 1.006 jobs/ms (intervals up to ±1%)" in plot.text
    # 20% apart: not flat, drawn as it is, on its own axis with its unit.
    wide = rows(1.0, 1.2, 1.1, 1.2, 0.01)
    assert flatness(_Stats(wide).st) is None
    plot = throughput(_ctx(wide))
    assert plot.figure.axes[0].get_ylabel() == "throughput (jobs/ms)"


def test_a_world_that_shares_its_runs_across_a_sweep_key_draws_one_line():
    """time-to-balance.toml sweeps simulator balancer cases beside the os world, whose runs
    do not depend on them (the runner shares one run between the cases): the os world is one
    line named without the case, each simulator case its own line."""
    from matplotlib.figure import Figure
    from schedlab.experiment import ReportFields
    from schedlab.report.plots import Context, _metric_axes

    cases, ns = ["a", "b"], [3, 7]
    summaries = pd.DataFrame(
        [("sim", c, n, "Linux", 0, f"sim-{c}-{n}") for c in cases for n in ns]
        + [("os", c, n, "Linux", 0, f"os-{n}") for c in cases for n in ns],
        columns=["world", "case", "workload.clients", "label", "replication", "run"])
    rows = [("sim", 2 * i + j, n, "Linux", ttb, ttb, ttb, c)
            for i, (c, ttb) in enumerate([("a", 60.0), ("b", 30.0)]) for j, n in enumerate(ns)]
    rows += [("os", 2 * i + j, n, "Linux", v, v - 5, v + 5, c)
             for i, c in enumerate(cases) for j, (n, v) in enumerate([(3, 40.0), (7, 30.0)])]
    res = _Stats([])
    st = pd.DataFrame(rows, columns=["world", "point", "workload.clients", "label", "mean",
                                     "ci_low", "ci_high", "case"])
    res.st = st.assign(half_width=(st["ci_high"] - st["ci_low"]) / 2, theory=math.nan)
    res.labels, res.sweep_keys, res.summaries = ["Linux"], ["case", "workload.clients"], summaries
    ctx = Context(res=res, cfg=ReportFields(), x="workload.clients", point=0)
    assert ctx.kept("sim") == ["case"] and ctx.kept("os") == []
    ax = Figure().subplots()
    _metric_axes(ctx, ax, "time_to_balance", flat="keep")
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in ax.lines}
    assert lines == {"Linux [sim], case=a": [60.0, 60.0], "Linux [sim], case=b": [30.0, 30.0],
                     "Linux [os]": [40.0, 30.0]}
    # A world whose runs differ between the cases keeps one line per case.
    summaries.loc[summaries.world == "os", "run"] = [f"os-{c}-{n}" for c in cases for n in ns]
    assert Context(res=res, cfg=ReportFields(), x="workload.clients", point=0).kept("os") == \
        ["case"]


def test_lines_of_one_policy_split_by_other_sweep_keys_have_colours_of_their_own():
    """smp-balancing/moderate.toml: one policy, the balancer and the CPUs swept beside the
    clients on x. Its four lines had one colour and one marker (the policy's), so the legend
    showed four identical swatches, and linux and windows lying on each other were not named
    (the caption compared policies only)."""
    from matplotlib.colors import to_hex
    from matplotlib.figure import Figure
    from schedlab.experiment import ReportFields
    from schedlab.report.plots import Context, _metric_axes

    keys = [(b, c) for b in ("linux", "windows") for c in (2, 4)]
    ns = [3, 7]
    summaries = pd.DataFrame(
        [("sim", b, c, n, "RR", 0, f"{b}-{c}-{n}") for b, c in keys for n in ns],
        columns=["world", "machine.balancer", "machine.cpus", "workload.clients", "label",
                 "replication", "run"])
    # The balancers agree at 4 CPUs (their lines lie on each other), not at 2.
    mean = {("linux", 2): [10.0, 20.0], ("windows", 2): [12.0, 25.0],
            ("linux", 4): [5.0, 9.0], ("windows", 4): [5.0, 9.0]}
    rows = [("sim", 2 * i + j, b, c, n, "RR", mean[b, c][j], mean[b, c][j] - 1,
             mean[b, c][j] + 1) for i, (b, c) in enumerate(keys) for j, n in enumerate(ns)]
    st = pd.DataFrame(rows, columns=["world", "point", "machine.balancer", "machine.cpus",
                                     "workload.clients", "label", "mean", "ci_low", "ci_high"])
    res = _Stats([])
    res.st = st.assign(half_width=1.0, theory=math.nan)
    res.labels = ["RR"]
    res.sweep_keys = ["machine.balancer", "machine.cpus", "workload.clients"]
    res.summaries = summaries
    ctx = Context(res=res, cfg=ReportFields(), x="workload.clients", point=0)
    ax = Figure().subplots()
    drawn = _metric_axes(ctx, ax, "response_mean", flat="keep")
    looks = {ln.get_label(): (to_hex(ln.get_color()), ln.get_marker()) for ln in ax.lines}
    assert sorted(looks) == ["RR, balancer=linux, cpus=2", "RR, balancer=linux, cpus=4",
                             "RR, balancer=windows, cpus=2", "RR, balancer=windows, cpus=4"]
    assert len({c for c, _ in looks.values()}) == 4  # a colour each
    assert len({m for _, m in looks.values()}) == 4  # and a marker each, for print
    assert "RR, balancer=linux, cpus=4 and RR, balancer=windows, cpus=4 have the same " \
        "values at every point" in drawn.coincide
    assert "cpus=2" not in drawn.coincide
    # One line per policy keeps the policy's own colour, as every other figure draws it.
    res.labels = ["FCFS", "RR"]
    assert ctx.series_styles([("RR",), ("FCFS",)]) == {
        ("RR",): (ctx.colors()["RR"], "s"), ("FCFS",): (ctx.colors()["FCFS"], "o")}


def test_a_global_runqueue_is_one_bar_not_cpu_0_beside_empty_cpus():
    """linux-policies/cpu.toml (runqueues = "global", 8 CPUs): the runnable-jobs panel drew
    the one global queue as "CPU 0" and CPUs 1-7 empty, beside CPUs all 100% busy. The os
    world's per-CPU samples keep their CPUs in the same panel."""
    from schedlab.report.plots import load

    ctx = _ctx([("sim", 1, 0.7, "FCFS", 1.0, 1.0, 1.0)])
    ctx.res.summaries = pd.DataFrame({
        "world": ["sim", "os"], "label": ["FCFS", "FCFS"], "point": [1, 1],
        "replication": [0, 0], "utilization_per_cpu": [[1.0] * 4, [0.9] * 4],
        "runnable_mean_per_cpu": [[40.0], [9.0, 11.0, 10.0, 10.0]]})
    plot = load(ctx)
    util, runnable = plot.figure.axes[:2]
    assert [t.get_text() for t in util.get_xticklabels()] == [f"CPU {i}" for i in range(4)]
    assert [t.get_text() for t in runnable.get_xticklabels()] == \
        ["CPU 0", "CPU 1", "CPU 2", "CPU 3", "global runqueue"]
    sim_bars, os_bars = runnable.containers
    assert [b.get_height() for b in sim_bars] == [40.0]
    assert 3.5 < sim_bars[0].get_x() < 4.5  # at the global runqueue's tick (4)
    assert [round(b.get_x() + b.get_width() / 2) for b in os_bars] == [0, 1, 2, 3]
    assert "share one queue" in plot.caption
    # A simulator alone with a global queue: one tick, its own.
    ctx.res.summaries = ctx.res.summaries[ctx.res.summaries.world == "sim"]
    runnable = load(ctx).figure.axes[1]
    assert [t.get_text() for t in runnable.get_xticklabels()] == ["global runqueue"]


def test_a_long_figure_title_is_wrapped_beside_its_legend_not_under_it():
    """smp-balancing/moderate.toml's "Runnable tasks per CPU over time at machine.balancer =
    windows, machine.cpus = 2, workload.clients = 7" ran out of its figure on the left ("le
    tasks per CPU...") and through the legend's "CPU 0" on the right."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from schedlab.report.plots import _figure, _suptitle, figure_legend

    text = ("Runnable tasks per CPU over time at machine.balancer = windows, machine.cpus = 2, "
            "workload.clients = 7, workload.think = det:10")
    fig, ax = _figure(figsize=(7.0, 3.0))
    for cpu in (0, 1):
        ax.step([0, 1, 2], [cpu, cpu + 1, cpu], label=f"CPU {cpu}")
    figure_legend(fig, ax)
    _suptitle(fig, text)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    title, legend = fig._suptitle.get_window_extent(renderer), \
        fig.legends[0].get_window_extent(renderer)
    assert fig._suptitle.get_text().replace("\n", " ") == text  # all of it, wrapped
    assert "\n" in fig._suptitle.get_text()
    assert title.x0 >= fig.bbox.x0 and title.x1 <= legend.x0, (title, legend)
    assert title.y1 <= fig.bbox.y1
    # A title that fits keeps one line.
    fig, ax = _figure(figsize=(7.0, 3.0))
    ax.plot([0, 1], label="CPU 0")
    figure_legend(fig, ax)
    _suptitle(fig, "Load")
    assert fig._suptitle.get_text() == "Load"


def test_the_captions_name_the_theory_marks_the_figure_draws():
    # "dotted lines (black bars)" under every figure: a sweep draws dotted lines only, a run
    # without a sweep black marks on its bars only.
    from schedlab.report.plots import percentiles, response

    swept = _ctx([("sim", p, x, "FCFS", m, m - 1, m + 1)
                  for p, x, m in ((0, 0.5, 2.0), (1, 0.7, 3.3))])
    for plot in (response(swept), percentiles(swept)):
        assert "dotted lines are" in plot.caption and "black" not in plot.caption
    swept.x = None
    assert "black marks on the bars are" in response(swept).caption
    assert "dotted" not in response(swept).caption


def test_a_column_of_numbers_reads_without_exponents_below_ten_million():
    # linux-policies/cpu.toml's table had "2490" above "2.491e+04" in one column, and
    # "1.26e+04 [0, 2.854e+04]". Four significant digits stay; the exponent goes below 10^7.
    from schedlab.report import _num
    from schedlab.summary_rows import interval_text, number_text

    cases = [(2490.0, "2490"), (24910.3, "24910"), (12600.4, "12600"), (1234567.0, "1235000"),
             (12345678.0, "1.235e+07"), (-24910.3, "-24910"), (0.5, "0.5"), (1.5e-7, "1.5e-07"),
             (999.95, "1000")]
    for value, text in cases:
        assert number_text(value) == _num(value) == text, value
    assert interval_text((0.0, 28540.2)) == "[0, 28540]"
    assert _num(float("nan")) == "–" and number_text(7) == "7"


def test_a_policy_the_sweep_key_does_not_touch_has_one_row_in_the_table():
    """rr-ps-fcfs: FCFS and PS run once for all seven RR quanta (their spec has no quantum),
    and the table repeated their identical rows seven times among RR's."""
    from schedlab.report import _response_table

    res = _Stats([("sim", p, q, label, m, m - 1, m + 1)
                  for p, q in enumerate((1.0, 20.0))
                  for label, m in (("FCFS", 218.2), ("RR", 398.0 if q == 1 else 218.2))])
    res.st = res.st.assign(n=1, method="batch means")
    res.sweep_keys = ["workload.load"]  # the swept key (its name does not matter here)
    res.summaries = pd.DataFrame(
        [("sim", p, q, label, 0, f"{label}-{q}" if label == "RR" else "FCFS")
         for p, q in enumerate((1.0, 20.0)) for label in ("FCFS", "RR")],
        columns=["world", "point", "workload.load", "label", "replication", "run"])
    html = _response_table(res)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row)[:3]
            for row in re.findall(r"<tr>(.*?)</tr>", html)[1:]]
    assert rows == [["all", "FCFS", "218.2"], ["1", "RR", "398"], ["20", "RR", "218.2"]]


def test_axis_units_are_the_vocabularys():
    from schedlab import vocabulary
    from schedlab.report.plots import METRICS, sweep_key_unit

    units = vocabulary.SUMMARY_UNITS
    shared = [k for k in METRICS if k in units]
    assert len(shared) >= 10
    for key in shared:
        assert METRICS[key][1] == units[key], key
    assert sweep_key_unit("workload.load") == "ratio"
    assert sweep_key_unit("policy.RR.quantum") == "ms"
    assert sweep_key_unit("machine.cpus") == "count"
    assert sweep_key_unit("workload.classes[0].tickets") == "ratio"
    assert sweep_key_unit("workload.trace") == "name"


def test_the_report_writes_each_stored_schedule_as_a_perfetto_trace_and_lists_it(small):
    # Issue 13: the report points to the schedules it has, as files Perfetto opens.
    out, html = small
    listed = re.findall(r"<li><code>(report/traces/(\w+)\.json)</code>: (.*?), ([\d,]+) "
                        r"slices</li>", html.read_text())
    res = schedlab.load_results(out)
    runs = res.summaries.set_index("run")
    stored = [r for r in runs.index if (out / "runs" / f"{r}.schedule.parquet").exists()]
    assert len(listed) == min(len(stored), 12) >= 6
    for path, run, label, slices in listed:
        data = json.loads((out / path).read_text())
        rows = len(res.run_table(run, "schedule"))
        assert int(slices.replace(",", "")) == rows > 0
        assert sum(e["ph"] == "X" for e in data["traceEvents"]) == rows
        assert label.startswith(runs.loc[run, "label"])
    # The runs of the report's point come first.
    assert runs.loc[listed[0][1], "point"] == report_context(res).point


def test_a_schedule_too_large_for_the_report_is_named_not_written(tmp_path, monkeypatch):
    from schedlab import report

    out = tmp_path / "capped"
    schedlab.run(SMALL, out=out)
    res = schedlab.load_results(out)
    sizes = {r: len(res.run_table(r, "schedule")) for r in res.summaries["run"]
             if (out / "runs" / f"{r}.schedule.parquet").exists()}
    cap = min(sizes.values())  # FCFS's 60 segments pass, the lottery runs' 184 do not
    assert max(sizes.values()) > cap
    monkeypatch.setattr(report, "TRACE_SLICES", cap)
    text = make_report(out).read_text()
    written = re.findall(r"<code>report/traces/(\w+)\.json</code>", text)
    named = re.findall(r"\(run (\w+)\): ([\d,]+) segments, more than", text)
    assert written and named
    assert all(sizes[r] <= cap for r in written)
    assert all(sizes[r] > cap and int(n.replace(",", "")) == sizes[r] for r, n in named)
    assert sorted(p.stem for p in (out / "report" / "traces").iterdir()) == sorted(written)


def test_a_bad_html_path_is_refused_before_any_figure_or_directory_is_made(small, tmp_path):
    out, _ = small
    made = sorted(p.name for p in (out / "report").iterdir())
    for html, why in ((tmp_path / "new" / "r.txt", "a file name ending in .html"),
                      ("/proc/x/r.html", "a file in a directory that can be made")):
        with pytest.raises(schedlab.SpecError) as e:
            make_report(out, html=html)
        assert str(e.value).startswith(f"html = {html}: expected {why}"), str(e.value)
    assert not (tmp_path / "new").exists()
    (tmp_path / "d.html").mkdir()
    with pytest.raises(schedlab.SpecError, match="a directory of that name"):
        make_report(out, html=tmp_path / "d.html")
    assert sorted(p.name for p in (out / "report").iterdir()) == made


def test_the_balance_caption_counts_traced_kernel_runs_whose_first_move_is_unknown():
    # Four traced kernel runs (shared by two simulator cases, so each appears twice): two
    # first moves by the idle CPU's balance, one by a newly-idle balance, one unknown (its
    # trace lacks a move the kernel counted); and a simulator run, which has no trace.
    from types import SimpleNamespace

    from matplotlib.figure import Figure
    from schedlab.report.plots import _traced_kernel_runs

    rows = [("os", "r1", 3, "idle balance", 30.0, 2), ("os", "r1", 3, "idle balance", 30.0, 2),
            ("os", "r2", 3, "newly-idle balance", 50.0, 3), ("os", "r3", 7, None, 40.0, 5),
            ("os", "r4", 7, "idle balance", 20.0, 4), ("sim", "s1", 3, None, 60.0, None)]
    s = pd.DataFrame(rows, columns=["world", "run", "workload.clients", "first_move_path",
                                    "time_to_balance", "moves"])
    ctx = SimpleNamespace(res=SimpleNamespace(summaries=s), x="workload.clients")
    ax = Figure().subplots()
    text = _traced_kernel_runs(ctx, ax)
    assert len(ax.collections) == 2  # one set of points per path
    assert ("(2 by idle balance, 1 by newly-idle balance of 3 runs; 1 more whose trace lacks "
            "a move the kernel counted, so its first move is unknown): an idle CPU") in text


def test_the_fairness_caption_warns_where_the_mean_slowdown_is_infinite(small):
    # Jain's index over slowdowns was drawn without a word where the mean slowdown is
    # infinite in theory (schedlab sim and a Result's notes say it): exp:1 sizes under
    # lottery, stride and FCFS, none of which serves a short job at once.
    from types import SimpleNamespace

    from schedlab.report.plots import _infinite_slowdown

    _, html_path = small
    text = " ".join(html_path.read_text().split())
    assert "WARNING: the mean slowdown of " in text
    labels = {r["label"] for r in schedlab.load_results(small[0]).manifest["runs"]}
    warned = text.split("WARNING: the mean slowdown of ")[1].split(" is infinite")[0]
    assert set(warned.split(", ")) == labels, warned

    def ctx(*runs):
        return SimpleNamespace(res=SimpleNamespace(manifest={"runs": list(runs)}))

    fcfs = {"world": "sim", "label": "FCFS", "spec": {"policy": "fcfs", "size": "exp:1"}}
    assert "of FCFS is infinite" in _infinite_slowdown(ctx(fcfs, {**fcfs, "label": "FCFS"}))
    # Deterministic sizes, a policy that serves short jobs at once, a real world, a run
    # skipped: nothing to say.
    for run in ({**fcfs, "spec": {"policy": "fcfs", "size": "det:20"}},
                {**fcfs, "spec": {"policy": "srpt", "size": "exp:1"}},
                {**fcfs, "world": "server"}, {**fcfs, "skip": "no model"}):
        assert _infinite_slowdown(ctx(run)) == "", run


def test_the_report_names_server_runs_whose_answers_were_not_success():
    # Stored summaries hold `status` as JSON; the 503s of a full server are counted there,
    # not measured, and the report says which runs had them.
    from types import SimpleNamespace

    from schedlab import report

    rows = [{"world": "server", "label": "FCFS", "point": 0, "replication": 1,
             "status": '{"200": 1870, "503": 627}'},
            {"world": "server", "label": "SJF", "point": 0, "replication": 0,
             "status": '{"200": 2497}'},
            {"world": "sim", "label": "FCFS", "point": 0, "replication": 0, "status": None},
            {"world": "server", "label": "RR", "point": 0, "replication": 0,
             "status": math.nan}]  # none recorded
    text = report._not_success_html(SimpleNamespace(summaries=pd.DataFrame(rows)))
    assert 'id="not-success-warning"' in text and "1 server run had" in text
    assert ("server, FCFS, point 0, replication 1: 627 of 2497 responses were not success "
            "(HTTP 503: 627)") in text and "SJF" not in text
    quiet = pd.DataFrame(rows[1:])
    assert report._not_success_html(SimpleNamespace(summaries=quiet)) == ""


def test_the_gap_tables_overlap_is_read_from_the_bounds_it_prints():
    # One run's intervals are uneven about its mean (skewness) or cut at 0: the reference's
    # 6.2 [0, 17.4] (half-width 8.7 as stored) and the other world's 16 [15, 17] share
    # [15, 17], where |16 - 6.2| > 8.7 + 1 said "no overlap".
    from types import SimpleNamespace

    def stats(world, mean, half, low, high):
        return {"world": world, "point": 0, "label": "FCFS", "mean": mean, "half_width": half,
                "ci_low": low, "ci_high": high, "n": 1, "method": "batch means",
                "uncorrelated": True}

    def res(other):
        table = pd.DataFrame([stats("sim", 6.2, 8.7, 0.0, 17.4), stats("server", *other)])
        return SimpleNamespace(metric=lambda m: table, manifest={"worlds": ["sim", "server"]},
                               labels=["FCFS"], sweep_keys=[], skipped=None,
                               summaries=pd.DataFrame())

    assert world_gap(res((16.0, 1.0, 15.0, 17.0)))["overlap"].tolist() == [True]
    assert world_gap(res((19.0, 1.0, 18.0, 20.0)))["overlap"].tolist() == [False]


def test_one_runs_stats_keep_the_spread_above_a_cut_and_every_interval_it_has(tmp_path):
    # One replication of 100 jobs: PS's p95 interval by sectioning reached below 0 and the
    # summary cut it, [0, high]; the stats table took half of that as the half-width, where
    # the estimator's spread is high - p95 (sectioning is even about the estimate). The
    # throughput and the mean slowdown, which every summary carries an interval of, had none.
    d = {"experiment": {"name": "one", "world": ["sim"], "seed": 1, "keep_jobs": True},
         "workload": {"load": 0.5, "size": "exp:1", "jobs": 100},
         "policy": [{"name": "fcfs", "label": "FCFS"}, {"name": "ps", "label": "PS"}]}
    res = schedlab.run(d, out=tmp_path / "one")
    st = res.stats.set_index(["label", "metric"])
    cut = 0
    for label in ("FCFS", "PS"):
        jobs = res.jobs[res.jobs["label"] == label].sort_values("completion", kind="stable")
        done = np.ascontiguousarray(jobs["response"].to_numpy(dtype=float))
        # The one summary code's p95 and interval over the same jobs (cut at 0 there too).
        (p95,), ((low, high),) = schedlab._core.quantiles_with_intervals(done, [0.95])
        row = st.loc[(label, "response_p95")]
        assert row["mean"] == pytest.approx(p95) and row["method"] == "sectioning"
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
        if low == 0:  # cut: the spread is the side above the estimate, more than half of it
            assert row["half_width"] == pytest.approx(high - p95, rel=1e-9)
            assert row["half_width"] > (high - low) / 2
            cut += 1
        else:
            assert row["half_width"] == pytest.approx((high - low) / 2, rel=1e-9)
        s = res.summaries[res.summaries["label"] == label].iloc[0]
        # The mean response's spread is its precision's, whatever the cut.
        assert st.loc[(label, "response_mean"), "half_width"] == pytest.approx(
            s["response_mean_precision"] * s["response_mean"], rel=1e-12)
        for metric, method in (("throughput", "batch means of the times between completions"),
                               ("slowdown_mean", "batch means")):
            row = st.loc[(label, metric)]
            assert row["method"] == method
            assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(s[f"{metric}_ci"]))
    assert cut >= 1  # the case at hand
    # At another level, one run's own 95% intervals are not passed for it (they were, under
    # a 90% heading): none, said why; with batches = B asked, the response mean's comes from
    # the B batch means at that level.
    d["experiment"]["confidence"] = 0.9
    st = schedlab.run(d, out=tmp_path / "ninety").stats.set_index(["label", "metric"])
    for metric in ("response_p95", "response_mean", "throughput"):
        row = st.loc[("PS", metric)]
        assert row["method"] == "none: one run's intervals are 95% ones (replications give 0.9)"
        assert math.isnan(row["ci_low"]) and math.isnan(row["half_width"])
    d["experiment"]["batches"] = 10
    st = schedlab.run(d, out=tmp_path / "batches").stats.set_index(["label", "metric"])
    assert st.loc[("PS", "response_mean"), "method"] == "batch means"
    assert st.loc[("PS", "response_mean"), "n"] == 10
    assert math.isfinite(st.loc[("PS", "response_mean"), "half_width"])


def test_small_and_large_jobs_pool_every_replication_at_the_files_confidence(tmp_path):
    # Each replication's per-job table replaced the one before: the bars were the last
    # replication's alone (its caption said "of every replication"), and the intervals 95%
    # whatever the file's confidence.
    from schedlab.experiment import ReportFields
    from schedlab.report.plots import Context, classes

    d = {"experiment": {"name": "pool", "world": ["sim"], "keep_jobs": True, "seed": 3,
                        "replications": 3, "confidence": 0.9},
         "workload": {"load": 0.6, "size": "exp:1", "jobs": 3000},
         "policy": [{"name": "fcfs"}]}
    res = schedlab.run(d, out=tmp_path / "pool")
    jobs = res.jobs
    assert sorted(jobs["replication"].unique()) == [0, 1, 2]
    plot = classes(Context(res=res, cfg=ReportFields(), x=None, point=0))
    lo, hi = np.quantile(jobs["size"], 0.5), np.quantile(jobs["size"], 0.9)
    assert f"(sim: small up to {lo:.3g}, large from {hi:.3g} ms)" in plot.caption
    assert "90% intervals treat jobs as independent" in plot.caption
    small = jobs.loc[jobs["size"] <= lo, "response"]
    (ax_small, _) = plot.figure.axes
    (bar,) = ax_small.patches
    assert bar.get_height() == pytest.approx(small.mean(), rel=1e-12)
    # Its error bar: Student t at 90% over the pooled small jobs.
    from scipy import stats as sps

    half = sps.t.ppf(0.95, len(small) - 1) * small.std(ddof=1) / np.sqrt(len(small))
    (bars,) = [c for c in ax_small.containers if hasattr(c, "lines")]
    segment = bars.lines[2][0].get_segments()[0]
    assert (segment[0][1], segment[1][1]) == (pytest.approx(small.mean() - half, rel=1e-9),
                                              pytest.approx(small.mean() + half, rel=1e-9))
