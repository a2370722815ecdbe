"""The reference docs cannot drift from the code: every summary key, table column and theory
function the code has is named in docs/ (experiments.md and policies.md are generated and
checked in test_experiments.py)."""

from __future__ import annotations

import schedlab
from conftest import ROOT
from schedlab import theory
from schedlab.results import JOB_COLUMNS

DOCS = ROOT / "docs"


def test_simulator_doc_names_every_result_key_and_column():
    text = (DOCS / "simulator.md").read_text()
    r = schedlab.simulate("lottery", quantum=1, clients=3, size="exp:1", cpus=2,
                          runqueues="per-cpu", time=100, load_sample=10, keep_jobs=True,
                          keep_schedule=True)
    names = (list(r.summary) + JOB_COLUMNS + list(r.tasks.columns) + list(r.loads.columns)
             + list(r.load_series.columns) + list(r.schedule.columns))
    missing = [n for n in names if f"`{n}`" not in text]
    assert not missing, f"docs/simulator.md does not name: {missing}"


def test_theory_doc_names_every_public_function():
    text = (DOCS / "theory.md").read_text()
    missing = [n for n in theory.__all__ if n.upper() != n and f"{n}(" not in text
               and f"`{n}`" not in text]
    assert not missing, f"docs/theory.md does not name: {missing}"
    for policy in theory.COVERED:
        assert f"| {policy} |" in text, policy


def test_readme_links_resolve():
    import re

    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert (ROOT / target).exists(), target
