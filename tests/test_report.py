"""`schedlab report`: figure files, one self-contained HTML file, rendered for real in headless
Chromium (Debian's chromium package, installed by `make setup`)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import schedlab
from conftest import ROOT
from schedlab import experiment as ex
from schedlab import worlds
from schedlab.report import make_report, unprecise_runs, world_gap

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
    "machine": {"cpus": 2},
    "policy": [{"name": "lottery", "quantum": 0.5}, {"name": "stride", "quantum": 0.5},
               {"name": "fcfs"}],
    "sweep": {"workload.think": ["exp:2", "exp:4"]},
    "report": {"gantt_max_segments": 1000},
}


def run_world(spec: dict) -> schedlab.Result:
    """A stand-in 'server' world for the side-by-side test: the simulator with a switch cost,
    so its numbers differ from the sim world's."""
    return schedlab.simulate(**{**spec, "context_switch": 0.05})


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


@pytest.mark.real
def test_report_cli_on_a_study(tmp_path):
    out = tmp_path / "convoy"
    schedlab.run(ROOT / "experiments" / "convoy" / "experiment.toml", out=out, quick=True)
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "schedlab"), "report", str(out), "--html",
                        str(tmp_path / "c.html")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "c.html").read_text()
    assert 'data-plot="gantt"' in text and 'data-plot="classes"' in text
    assert 'id="worlds"' in text  # sim and server side by side, with the gap
    res = schedlab.load_results(out)
    # Median over replications (the simulator has one; the server three under --quick): one
    # scheduling hiccup of the shared machine in one run must not decide the comparison.
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
    assert set(gap["world"]) == {"server"} and len(gap) == 2
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "schedlab"), "report",
                        str(tmp_path / "nothing")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "manifest.json" in r.stderr


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
    assert "p99 [95% CI]" in table
    assert f"theory {st.loc[('FCFS', 'response_p99'), 'theory']:.4g}" in table
    # The theory's CDF (and its p95/p99 marks) beside FCFS's measured one, none for SRPT;
    # the end of the automatic warm-up on the load over time.
    cdf = re.search(r'<figure[^>]*data-plot="cdf".*?</figure>', html, re.S)[0]
    assert 'id="theory-cdf-FCFS"' in cdf and 'id="theory-tail-FCFS"' in cdf
    assert "theory-cdf-SRPT" not in cdf
    series = re.search(r'<figure[^>]*data-plot="load_series".*?</figure>', html, re.S)[0]
    assert series.count('id="warmup-end"') >= 1 and "end of the warm-up" in series
