"""Lottery and stride: tickets 30/20/10 give CPU shares 50/33.3/16.7%.

Three closed-loop tasks that never finish their work stay runnable all run long, so every
instant is contended and the share is measured over that interval (the trap of study 004,
shares read after competitors left, cannot occur). Stride is deterministic: its service stays
within one quantum of the exact share at every point. Lottery is random: each quantum is a
draw, so its shares are within the binomial error of the ticket ratios.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import schedlab

TICKETS = [30, 20, 10]
SHARES = [t / sum(TICKETS) for t in TICKETS]
CLASSES = [{"name": n, "tickets": t, "clients": 1} for n, t in zip("ABC", TICKETS, strict=True)]


def run(policy: str, quanta: int, seed: int = 1):
    return schedlab.simulate(policy, quantum=1, clients=None, classes=CLASSES, size="det:1e9",
                             think="det:0", time=float(quanta), keep_schedule=True, seed=seed)


def test_stride_is_within_one_quantum_of_exact_at_every_point():
    r = run("stride", 30_000)
    seg = r.schedule.sort_values("end")
    assert (seg["end"] - seg["start"]).max() == pytest.approx(1.0)
    served = np.zeros(3)
    worst = 0.0
    for task, start, end in zip(seg["task"], seg["start"], seg["end"], strict=True):
        served[task] += end - start
        worst = max(worst, float(np.abs(served - np.array(SHARES) * end).max()))
    assert worst <= 1.0 + 1e-9, worst
    assert list(r.tasks["share"]) == pytest.approx(SHARES, abs=1 / 30_000 + 1e-12)
    assert list(r.tasks["entitled"]) == pytest.approx(SHARES, abs=1e-12)
    assert r.summary["jain_share"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lottery_shares_are_within_binomial_error(seed):
    quanta = 60_000
    r = run("lottery", quanta, seed=seed)
    seg = r.schedule
    assert len(seg) == quanta  # one draw per quantum, nobody blocks
    counts = np.bincount(seg["task"], minlength=3)
    for got, p in zip(counts / quanta, SHARES, strict=True):
        sigma = math.sqrt(p * (1 - p) / quanta)
        assert abs(got - p) < 4 * sigma, (got, p, sigma)
    # The summary's per-task shares are the same measurement.
    assert list(r.tasks["share"]) == pytest.approx(list(counts / quanta), abs=1e-9)
