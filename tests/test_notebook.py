"""Notebooks: the docs notebook runs from top to bottom and shows the numbers it claims, and
what a user holds in one (Result, Replications, a results directory) shows itself as a table
with units and 95% intervals, every text escaped."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import nbformat
import pytest
import schedlab
from conftest import ROOT
from nbclient import NotebookClient
from schedlab.stats import t_interval
from schedlab.summary_rows import OS_SUMMARY_ROWS, SUMMARY_ROWS

NOTEBOOK = ROOT / "docs" / "notebooks" / "convoy.ipynb"

# The burst of experiments/convoy (5 large requests of 59.4 ms at 0, 10 small of 0.0205 ms at
# 50, 2 CPUs), by hand. FCFS: large 3 and 4 run 59.4-118.8, then large 5 on one CPU and the
# small ones one after another on the other, from 118.8. SFF: at 59.4 both CPUs take the small
# ones, 5 each, then large 3 and 4 from 59.5025 and large 5 from 118.9025.
SMALL = 0.0205
BURST = {
    "FCFS": {"small": 118.8 - 50 + SMALL * 5.5, "large": (2 * 59.4 + 2 * 118.8 + 178.2) / 5},
    "SFF": {"small": 59.4 - 50 + SMALL * 3,
            "large": (2 * 59.4 + 2 * (59.4 + 5 * SMALL + 59.4) + (59.4 + 5 * SMALL + 2 * 59.4))
            / 5},
}
# Steady state, M/G/1 with hyperexp:1,3 sizes (E[S] = 1, E[S^2] = (1 + 3^2) E[S]^2 = 10) at
# load 0.8, FCFS by Pollaczek-Khinchine: 1 + 0.8 * 10 / (2 * 0.2) = 21 ms.
PK_FCFS = 1 + 0.8 * 10 / (2 * (1 - 0.8))
# A simulated mean against its closed form: within this fraction of it, and within two
# half-widths of its 95% interval (4 replications: t = 3.18, so about 6 standard errors).
REL_TOL = 0.05


class Tables(HTMLParser):
    """The tables of an HTML fragment as lists of rows of cell texts (header row first), and
    the text of its paragraphs."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.paragraphs: list[str] = []
        self._cell: list[str] | None = None
        self._para: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "p":
            self._para = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "p":
            self.paragraphs.append("".join(self._para))
            self._para = None

    def handle_data(self, data):
        for part in (self._cell, self._para):
            if part is not None:
                part.append(data)


def interval(ci) -> str:
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]"


# ---------------------------------------------------------------------------------------------
# The docs notebook
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # Run from the notebook's own folder, as Jupyter does; the kernel is the venv's python3.
    # The timeout only keeps a hung kernel from hanging the suite.
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return nb


def notebook_numbers(nb) -> dict:
    last = nb.cells[-1]
    text = "".join(o["text"] for o in last.outputs if o.get("name") == "stdout")
    return json.loads(text.strip().splitlines()[-1])


def test_the_stored_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) >= 8
    assert all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_burst_gives_the_hand_computed_means(executed):
    numbers = notebook_numbers(executed)
    for source in ("burst", "experiment"):  # simulate() and the experiment file, sim only
        for policy, classes in BURST.items():
            for cls, expected in classes.items():
                got = numbers[source][policy][cls]
                assert got == pytest.approx(expected, rel=1e-9), (source, policy, cls, got)
    # The convoy: 68.9 ms against 9.46 ms for the small requests, the large ones unchanged.
    small = numbers["burst"]
    assert small["FCFS"]["small"] / small["SFF"]["small"] > 7
    assert small["SFF"]["large"] - small["FCFS"]["large"] == pytest.approx(SMALL * 3)


def test_steady_state_means_match_theory(executed):
    steady = notebook_numbers(executed)["steady"]
    assert steady["fcfs"]["theory"] == pytest.approx(PK_FCFS, rel=1e-9)  # 21 ms
    assert steady["sjf"]["theory"] == pytest.approx(6.9236, rel=1e-4)
    for policy, row in steady.items():
        low, high = row["ci"]
        assert abs(row["mean"] - row["theory"]) <= REL_TOL * row["theory"], (policy, row)
        assert abs(row["mean"] - row["theory"]) <= (high - low), (policy, row)
    assert steady["fcfs"]["mean"] / steady["sjf"]["mean"] > 2.5


def test_the_load_sweep_follows_theory_and_sff_is_always_faster(executed):
    rows = notebook_numbers(executed)["sweep"]
    loads = sorted({r["workload.load"] for r in rows})
    assert loads == [0.3, 0.5, 0.7, 0.8]  # the [quick] table's loads
    mean = {(r["workload.load"], r["label"]): r for r in rows}
    assert len(mean) == 8
    for r in rows:
        assert math.isfinite(r["theory"]), r
        assert abs(r["mean"] - r["theory"]) <= REL_TOL * r["theory"], r
        assert abs(r["mean"] - r["theory"]) <= r["ci_high"] - r["ci_low"], r
    for load in loads:
        assert mean[load, "SFF"]["mean"] < mean[load, "FCFS"]["mean"], load
    fcfs = [mean[load, "FCFS"]["mean"] for load in loads]
    assert fcfs == sorted(fcfs)  # FCFS grows with the load
    assert mean[0.8, "FCFS"]["theory"] == pytest.approx(PK_FCFS, rel=1e-9)


def test_the_notebook_shows_tables_and_plots(executed):
    html = [o["data"]["text/html"] for c in executed.cells for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]
    results = [h for h in html if "Result fcfs: 15 jobs on 2 CPUs" in h]
    assert len(results) == 1 and "by class" in results[0] and "jobs/ms" in results[0]
    replications = [h for h in html if "Replications fcfs" in h]
    assert len(replications) == 1 and "Student t" in replications[0]
    directories = [h for h in html if "Results convoy" in h or "Results convoy-load" in h]
    assert len(directories) == 2
    assert any("theory: response mean (ms)" in h for h in directories)
    images = [o for c in executed.cells for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the schedule and the load sweep


# ---------------------------------------------------------------------------------------------
# _repr_html_ and __repr__
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def classy_trace(write_trace):
    # A class named like markup, and 40 jobs so that batch means give intervals.
    rows = [(i * 2.0, 5.0 if i % 4 == 0 else 1.0, "<b>" if i % 4 == 0 else "small")
            for i in range(40)]
    return write_trace("arrival,size,class", rows)


def test_result_html_has_units_intervals_and_escapes(classy_trace):
    r = schedlab.simulate("fcfs", trace=classy_trace,
                          classes=[{"name": "<b>"}, {"name": "small"}], cpus=1)
    text = r._repr_html_()
    t = Tables(text)
    metrics, classes = t.tables
    assert metrics[0] == ["metric", "value", "95% interval", "unit"]
    units = {label: unit for _, label, unit in SUMMARY_ROWS}
    shown = {row[0]: row for row in metrics[1:]}
    for label, (_, _, _, unit) in shown.items():
        assert unit == units[label], (label, unit)
    assert {"ms", "jobs/ms", "ratio", "count"} <= {row[3] for row in metrics[1:]}
    s = r.summary
    # 40 jobs: too few to find uncorrelated batches, so every interval is marked.
    assert s["ci_uncorrelated"] is False
    assert shown["response mean"][1] == f"{s['response_mean']:.4g}"
    assert shown["response mean"][2] == interval(s["response_mean_ci"]) + "†"
    assert shown["wait mean"][2] == interval(s["wait_mean_ci"]) + "†"
    for key, label, _ in SUMMARY_ROWS:  # an interval exactly where the summary has one
        ci = s.get(f"{key}_ci")
        if label in shown:
            has = ci is not None and all(math.isfinite(c) for c in ci)
            assert shown[label][2] == (interval(ci) + "†" if has else ""), label
    # The throughput has its interval (the gaps between completions); a spread has none.
    assert shown["throughput"][2] == interval(s["throughput_ci"]) + "†"
    assert shown["response std"][2] == ""
    assert shown["throughput"][1] == f"{s['throughput']:.4g}"
    # The class table: escaped markup; per class its jobs, then each metric with its
    # interval (marked: 10 and 30 jobs are too few for either class) and its unit.
    assert "&lt;b&gt;" in text and "<b>" not in text
    assert classes[0] == ["class", "metric", "value", "95% interval", "unit"]
    firsts = [row for row in classes[1:] if row[0]]
    assert firsts == [["<b>", "jobs", "10", "", "count"], ["small", "jobs", "30", "", "count"]]
    assert len(classes) == 1 + 2 * 5
    for c, (_, record) in enumerate(r.classes.iterrows()):
        assert record["ci_uncorrelated"] == False  # noqa: E712 (a numpy bool)
        rows = {row[1]: row for row in classes[2 + 5 * c: 1 + 5 * (c + 1)]}
        assert list(rows) == ["response mean", "response p99", "wait mean", "slowdown mean"]
        for key, label in (("response_mean", "response mean"), ("wait_mean", "wait mean"),
                           ("response_p99", "response p99"),
                           ("slowdown_mean", "slowdown mean")):
            ci = record[f"{key}_ci"]
            has = all(math.isfinite(x) for x in ci)
            assert rows[label][2:] == [f"{record[key]:.4g}", interval(ci) + "†" if has else "",
                                       units[label]], (c, label)
        assert rows["response mean"][3] != ""
    assert t.paragraphs == [f"Result fcfs: 40 jobs on 1 CPU, seed 1 (sim); 95% intervals from "
                            f"{s['ci_batches']} batch means, not shown uncorrelated (†: too "
                            "few jobs to trust them)"]
    line = repr(r)
    assert "\n" not in line and len(line) < 300
    assert line.startswith("<Result fcfs: 40 jobs on 1 CPU, seed 1")
    assert f"response mean {s['response_mean']:.4g} ms {interval(s['response_mean_ci'])}" in line


def test_os_rows_carry_their_own_units():
    units = {key: unit for key, _, unit in OS_SUMMARY_ROWS}
    assert units["contended_ms"] == "ms" and units["foreign_fraction"] == "ratio"
    assert units["throughput"] == "jobs/ms" and units["migrations"] == "count"


def test_replications_html_shows_the_student_t_interval():
    reps = schedlab.simulate("sjf", load=0.7, size="exp:1", jobs=4000, replications=3, seed=5)
    t = Tables(reps._repr_html_())
    shown = {row[0]: row for row in t.tables[0][1:]}
    iv = t_interval([r.summary["response_mean"] for r in reps.runs], 0.95)
    assert shown["response mean"][1] == f"{iv.mean:.4g}"
    assert shown["response mean"][2] == interval([iv.low, iv.high])
    assert shown["response mean"][3] == "ms" and shown["throughput"][3] == "jobs/ms"
    assert len(t.tables) == 1  # one class: no class table
    assert t.paragraphs[0].startswith("Replications sjf: 12000 jobs on 1 CPU, seed 5 (sim) in "
                                      "3 replications")
    assert repr(reps).startswith("<Replications sjf: 12000 jobs on 1 CPU, seed 5")


def test_results_directory_html_has_units_intervals_theory_and_escapes(tmp_path):
    res = schedlab.run({
        "experiment": {"name": "<i>tiny</i>", "replications": 2, "seed": 3},
        "workload": {"size": "exp:1", "jobs": 3000},
        "policy": [{"name": "fcfs", "label": "<b>"}, {"name": "ps", "label": "PS"}],
        "sweep": {"workload.load": [0.5, 0.7]},
    }, out=tmp_path / "tiny", progress=False)
    text = res._repr_html_()
    assert "<b>" not in text and "&lt;b&gt;" in text and "&lt;i&gt;tiny" in text
    t = Tables(text)
    (table,) = t.tables
    header, rows = table[0], table[1:]
    assert header == ["workload.load", "policy", "response mean (ms) [95% interval]",
                      "response p99 (ms) [95% interval]", "throughput (jobs/ms) [95% interval]",
                      "theory: response mean (ms)"]
    assert [(r[0], r[1]) for r in rows] == [("0.5", "<b>"), ("0.5", "PS"), ("0.7", "<b>"),
                                            ("0.7", "PS")]
    m = res.metric("response_mean")
    one = m[(m["workload.load"] == 0.7) & (m["label"] == "PS")].iloc[0]
    assert rows[3][2] == f"{one['mean']:.4g} {interval([one['ci_low'], one['ci_high']])}"
    assert rows[3][5] == f"{one['theory']:.4g}" and one["theory"] == pytest.approx(1 / 0.3)
    assert t.paragraphs[-1].startswith("Results <i>tiny</i>: <b>, PS at 2 points, "
                                       "2 replications in sim; 8 runs of 3000 jobs on 1 CPU, "
                                       "seed 3")
    line = repr(res)
    assert "\n" not in line and line.startswith("<Results <i>tiny</i>: <b>, PS at 2 points")
