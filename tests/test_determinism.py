"""Same seed, identical per-job output; different seeds, different output. Every policy,
including the randomised one (lottery), and closed workloads with random think times."""

from __future__ import annotations

import pandas as pd
import pytest
import schedlab
from conftest import assert_conserved
from schedlab.vocabulary import policy_catalog

POLICIES = [p["name"] for p in policy_catalog()]


def jobs(policy: str, seed: int, **extra) -> pd.DataFrame:
    spec = dict(size="hyperexp:1,3", jobs=5000, warmup=100, seed=seed)
    spec.update(extra)
    if "clients" not in spec:
        spec["load"] = 0.8
    r = schedlab.simulate(policy, **spec)
    assert_conserved(r.summary, little_tolerance=0.1)
    return r.jobs


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_jobs_other_seed_other_jobs(policy):
    extra = {"classes": [{"size": "exp:1", "deadline": 5}]} if policy == "edf" else {}
    a, b, c = (jobs(policy, s, **extra) for s in (7, 7, 8))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not a["response"].equals(c["response"])


def test_closed_workload_is_reproducible():
    extra = dict(clients=5, think="exp:2")
    a, b, c = (jobs("lottery", s, **extra) for s in (3, 3, 4))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not a["arrival"].equals(c["arrival"])
