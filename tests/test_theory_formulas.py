"""schedlab.theory against values computed independently of it: the reference table, numbers
worked by hand (arithmetic in the comments), brute-force stationary distributions and scipy."""

from __future__ import annotations

import csv
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import schedlab
from conftest import SCHEDLAB, cli_env
from schedlab import theory
from schedlab._core import SpecError
from scipy import integrate, special, stats

ROOT = Path(__file__).resolve().parents[1]
_SHARED = ROOT.parent / "shared" / "reference" / "mg1.csv"
MG1 = _SHARED if _SHARED.exists() else ROOT / "tests" / "data" / "reference" / "mg1.csv"
POLICIES = ["fcfs", "ps", "srpt", "psjf", "sjf", "fb"]


def _rows() -> list[dict[str, str]]:
    with open(MG1, newline="") as f:
        return list(csv.DictReader(f))


# --- (a) M/G/1 by policy against the reference table --------------------------------------------


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['size']}@{r['rho']}")
@pytest.mark.parametrize("policy", POLICIES)
def test_mg1_reference_table(row, policy):
    got = theory.mean_response(policy, row["arrival"], row["size"])
    # The table has 6 significant digits; 1e-4 leaves room for its rounding only.
    assert got == pytest.approx(float(row[policy]), rel=1e-4)


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['size']}@{r['rho']}")
def test_poisson_at_load_matches_reference_arrivals(row):
    text = theory.poisson_at_load(float(row["rho"]), row["size"])
    assert text.startswith("exp:")
    assert float(text[4:]) == pytest.approx(float(row["arrival"][4:]), rel=1e-6)


def test_poisson_at_load_per_cpu_and_round_trip():
    # E[S] = 1, load 0.9 per CPU on 8 CPUs: MEAN = 1 / 7.2; repr keeps every digit.
    assert float(theory.poisson_at_load(0.9, "exp:1", cpus=8)[4:]) == 1 / 7.2
    assert float(theory.poisson_at_load(0.5, "det:20")[4:]) == 40.0


@pytest.mark.parametrize(("alias", "name"), [
    ("fifo", "fcfs"), ("srtf", "srpt"), ("las", "fb"), ("sff", "sjf"), ("spt", "sjf"),
    ("lcfs-pr", "ps"), ("lifo", "ps"), ("lcfs", "ps"), ("processor-sharing", "ps"),
    ("round-robin", "ps"), ("rr", "ps"), ("FCFS", "fcfs"),
])
def test_aliases(alias, name):
    # Reference row exp:1 at rho 0.8: fcfs 5, ps 5, srpt 2.35277, psjf 2.6589, sjf 2.88222, fb 5;
    # a size distribution where every policy differs is bpareto at rho 0.8.
    row = _rows()[4]
    assert theory.mean_response(alias, row["arrival"], row["size"]) == pytest.approx(
        float(row[name]), rel=1e-4)


def test_lcfs_non_preemptive_has_the_fcfs_mean():
    row = _rows()[4]
    for flag in (False, "false"):
        got = theory.mean_response("lcfs", row["arrival"], row["size"], preemptive=flag)
        assert got == pytest.approx(float(row["fcfs"]), rel=1e-4)


# Two equally likely sizes {1, 3} (an empirical file), lambda = 0.25: rho = 0.25 * 2 = 0.5,
# classes by size rho_1 = 0.125 * 1 = 0.125, rho_3 = 0.125 * 3 = 0.375, E[S^2] = (1 + 9)/2 = 5.
#   FCFS: 2 + 0.25 * 5 / (2 * 0.5) = 3.25.           PS: 2 / 0.5 = 4.
#   SJF:  T(1) = 1 + 0.625 / (1 * 0.875) = 1.714286; T(3) = 3 + 0.625 / (0.875 * 0.5) = 4.428571.
#   PSJF: T(1) = 1 + 0.25 * 0.5 / 2 / 0.875 = 1.071429;
#         T(3) = 3 / 0.875 + 0.625 / (0.875 * 0.5) = 3.428571 + 1.428571 = 4.857143.
#   SRPT: T(1) = 0.25 * (0.5 + 1 * 0.5) / (2 * 0.875 * 1) + 1 = 1.142857 (its waiting: size-1 work
#         and a size-3 job with <= 1 left; then nothing is smaller than it);
#         T(3) = 0.25 * 5 / (2 * 0.5 * 0.875) + (1 + 2 / 0.875) = 1.428571 + 3.285714 = 4.714286
#         (size-1 arrivals overtake it while more than 1 remains).
#   FB:   T(1): rho_x = 0.25 * 1, E[min(S,1)^2] = 1: (0.75 + 0.125) / 0.75^2 = 1.555556;
#         T(3): rho_x = 0.5, E[S^2] = 5: (3 * 0.5 + 0.625) / 0.25 = 8.5.
#   FCFS T(x) = x + 1.25: 2.25 and 4.25.  PS T(x) = x / 0.5: 2 and 6.
TWO_SIZES = {
    "fcfs": (2.25, 4.25), "ps": (2.0, 6.0), "sjf": (1 + 0.625 / 0.875, 3 + 0.625 / 0.4375),
    "psjf": (1 + 0.0625 / 0.875, 3 / 0.875 + 0.625 / 0.4375),
    "srpt": (1 + 0.125 / 0.875, 0.625 / 0.4375 + 1 + 2 / 0.875), "fb": (0.875 / 0.5625, 8.5),
}


@pytest.fixture
def two_sizes(tmp_path):
    path = tmp_path / "sizes.csv"
    path.write_text("size\n1\n3\n3\n1\n")
    return f"empirical:{path}"


@pytest.mark.parametrize("policy", sorted(TWO_SIZES))
def test_empirical_point_masses_exactly(two_sizes, policy):
    small, large = TWO_SIZES[policy]
    assert theory.conditional_response(policy, "exp:4", two_sizes, 1) == pytest.approx(
        small, rel=1e-12)
    assert theory.conditional_response(policy, "exp:4", two_sizes, 3) == pytest.approx(
        large, rel=1e-12)
    assert theory.mean_response(policy, "exp:4", two_sizes) == pytest.approx(
        (small + large) / 2, rel=1e-12)


# Uniform on [0, 2] has polynomial partial moments: F(x) = x/2, m_1(x) = x^2/4, m_2(x) = x^3/6,
# E[S] = 1, E[S^2] = 4/3. The integrals below are one-dimensional quad over those polynomials.
LAM_U = 0.8


def _uniform_by_hand() -> dict[str, float]:
    lam = LAM_U

    def rho(x):
        return lam * x * x / 4

    def mean(t):  # E[T] = integral_0^2 T(x) dx / 2
        return integrate.quad(lambda x: t(x) / 2, 0, 2, epsabs=0, epsrel=1e-12)[0]

    def fb(x):
        rx = lam * (x - x * x / 4)  # E[min(S, x)] = x^2/4 + x (1 - x/2)
        return (x * (1 - rx) + lam * (x * x - x**3 / 3) / 2) / (1 - rx) ** 2

    srpt_res = integrate.quad(lambda t: (1 - t / 2) / (1 - rho(t)), 0, 2, epsrel=1e-12)[0]
    return {
        "fcfs": 1 + lam * (4 / 3) / (2 * (1 - lam)),
        "ps": 1 / (1 - lam),
        "sjf": mean(lambda x: x + lam * (4 / 3) / 2 / (1 - rho(x)) ** 2),
        "psjf": mean(lambda x: x / (1 - rho(x)) + lam * x**3 / 6 / 2 / (1 - rho(x)) ** 2),
        "srpt": mean(lambda x: lam * (x**3 / 6 + x * x * (1 - x / 2)) / 2 / (1 - rho(x)) ** 2)
        + srpt_res,
        "fb": mean(fb),
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_uniform_sizes_against_polynomial_forms(policy):
    expected = _uniform_by_hand()[policy]
    assert theory.mean_response(policy, f"exp:{1 / LAM_U!r}", "uniform:0,2") == pytest.approx(
        expected, rel=1e-8)


# Hyperexponential sizes through closed exponential partial moments written here:
# for an exponential of mean m, m_1(x) = m (1 - e^{-x/m} (1 + x/m)),
# m_2(x) = 2 m^2 (1 - e^{-x/m} (1 + x/m + x^2/(2 m^2))).
def test_hyperexp_srpt_psjf_fb_against_direct_quadrature():
    c2 = 9.0  # hyperexp:1,3
    p = 0.5 * (1 + math.sqrt((c2 - 1) / (c2 + 1)))
    phases = [(p, 1 / (2 * p)), (1 - p, 1 / (2 * (1 - p)))]
    lam = 0.7

    def pdf(x):
        return sum(w * math.exp(-x / m) / m for w, m in phases)

    def sf(x):
        return sum(w * math.exp(-x / m) for w, m in phases)

    def m1(x):
        return sum(w * m * (1 - math.exp(-x / m) * (1 + x / m)) for w, m in phases)

    def m2(x):
        return sum(w * 2 * m * m * (1 - math.exp(-x / m) * (1 + x / m + x * x / (2 * m * m)))
                   for w, m in phases)

    def mean(t):
        return integrate.quad(lambda x: t(x) * pdf(x), 0, np.inf, epsabs=0, epsrel=1e-11,
                              limit=400)[0]

    def fb(x):
        rx, e2 = lam * (m1(x) + x * sf(x)), m2(x) + x * x * sf(x)
        return (x * (1 - rx) + lam * e2 / 2) / (1 - rx) ** 2

    expected = {
        "psjf": mean(lambda x: x / (1 - lam * m1(x)) + lam * m2(x) / 2 / (1 - lam * m1(x)) ** 2),
        "srpt": mean(lambda x: lam * (m2(x) + x * x * sf(x)) / 2 / (1 - lam * m1(x)) ** 2)
        + integrate.quad(lambda t: sf(t) / (1 - lam * m1(t)), 0, np.inf, epsrel=1e-11)[0],
        "fb": mean(fb),
    }
    for policy, value in expected.items():
        got = theory.mean_response(policy, f"exp:{1 / lam!r}", "hyperexp:1,3")
        assert got == pytest.approx(value, rel=1e-7), policy


# P-K needs only E[S^2] = (1 + CV^2) E[S]^2, so FCFS checks each distribution's definition:
#   hyperexp:1,3 at lambda 0.8: 1 + 0.8 * 10 / (2 * 0.2) = 21.
#   lognormal:2,0.5 and erlang:4,2 (E[S^2] = 4 * 1.25 = 4 + 4/4 = 5) at lambda 0.4:
#   2 + 0.4 * 5 / 0.4 = 7.
#   uniform:1,3 (E[S^2] = (27 - 1) / 6 = 13/3) at lambda 0.4: 2 + 13/3.
#   bpareto:2,1,10: f(x) = 2 x^-3 / 0.99, E[S] = 2 (1 - 1/10) / 0.99 = 20/11,
#   E[S^2] = 2 ln(10) / 0.99; at lambda 0.5: 20/11 + 0.5 * E[S^2] / (2 (1 - 10/11)).
@pytest.mark.parametrize(("size", "lam", "expected"), [
    ("hyperexp:1,3", 0.8, 21.0),
    ("lognormal:2,0.5", 0.4, 7.0),
    ("erlang:4,2", 0.4, 7.0),
    ("uniform:1,3", 0.4, 2 + 13 / 3),
    ("bpareto:2,1,10", 0.5, 20 / 11 + 0.5 * (2 * math.log(10) / 0.99) / (2 / 11)),
])
def test_pollaczek_khinchine_for_each_distribution(size, lam, expected):
    assert theory.mean_response("fcfs", f"exp:{1 / lam!r}", size) == pytest.approx(
        expected, rel=1e-10)


@pytest.mark.parametrize(("size", "dist"), [
    ("erlang:3,2", stats.gamma(3, scale=2 / 3)),
    ("lognormal:1,2", stats.lognorm(math.sqrt(math.log(5)), scale=math.exp(-math.log(5) / 2))),
    ("bpareto:1.5,1,1000", stats.truncpareto(1.5, 1000)),
    ("uniform:1,3", stats.uniform(1, 2)),
])
def test_partial_moments_against_scipy(size, dist):
    s = theory._Size.parse(size)
    for x in dist.ppf([0.1, 0.5, 0.9, 0.999]):
        assert s.cdf(x) == pytest.approx(dist.cdf(x), rel=1e-10)
        assert s.sf(x) == pytest.approx(dist.sf(x), rel=1e-9)
        for k in (1, 2):
            ref = integrate.quad(lambda t, k=k: t**k * dist.pdf(t), dist.support()[0], x,
                                 epsabs=0, epsrel=1e-12, limit=200)[0]
            assert s.m(k, x) == pytest.approx(ref, rel=1e-8)
    for k in (1, 2, 3):
        assert s.moment(k) == pytest.approx(dist.moment(k), rel=1e-9)


@pytest.mark.parametrize("x", [0.1, 1.0, 3.0, 10.0])
def test_conditional_response_simple_forms(x):
    # exp:1 at rho 0.8: PS x / 0.2, FCFS x + 4 (W = 0.8 * 2 / (2 * 0.2)).
    assert theory.conditional_response("ps", "exp:1.25", "exp:1", x) == pytest.approx(x / 0.2)
    assert theory.conditional_response("fcfs", "exp:1.25", "exp:1", x) == pytest.approx(x + 4)


@pytest.mark.parametrize(("policy", "expected"), [
    ("srpt", 2.35277), ("psjf", 2.6589), ("sjf", 2.88222), ("fb", 5.0)])
def test_conditional_response_mean_over_sizes(policy, expected):
    def weighted(x):
        return theory.conditional_response(policy, "exp:1.25", "exp:1", x) * math.exp(-x)

    got = sum(integrate.quad(weighted, a, b, epsrel=1e-9)[0]
              for a, b in [(0, 1), (1, 4), (4, 12), (12, 40)])
    assert got == pytest.approx(expected, rel=1e-4)


def test_det_sizes_conditional_is_the_mean():
    # Every job has size 20, so E[T(20)] = E[T]; reference row det:20 at rho 0.9.
    row = _rows()[8]
    for policy in POLICIES:
        got = theory.conditional_response(policy, row["arrival"], row["size"], 20)
        assert got == pytest.approx(float(row[policy]), rel=1e-4)


# --- (b) Erlang C and M/M/k --------------------------------------------------------------------


def test_erlang_c_by_hand():
    # k = 2, a = 1.6: C = (a^k/k!) (k/(k-a)) / (sum_{n<k} a^n/n! + (a^k/k!) (k/(k-a)))
    #   a^2/2! = 1.28, k/(k-a) = 5: numerator 6.4; denominator 1 + 1.6 + 6.4 = 9: C = 32/45.
    assert theory.erlang_c(2, 1.6) == pytest.approx(32 / 45, rel=1e-12)
    # k = 1: C = a (an arrival waits iff the server is busy).
    assert theory.erlang_c(1, 0.7) == pytest.approx(0.7, rel=1e-12)
    # M/M/2, lambda 1.6, mu 1: 32/45 / (2 - 1.6) + 1 = 2.777...
    assert theory.mmk_mean_response(1.6, 1.0, 2) == pytest.approx(32 / 45 / 0.4 + 1, rel=1e-12)
    # M/M/1: 1 / (mu - lambda).
    assert theory.mmk_mean_response(0.9, 1.0, 1) == pytest.approx(10.0, rel=1e-12)


def _birth_death(lam: float, mu: float, k: int, states: int) -> tuple[float, float]:
    """(P(wait), E[T]) of M/M/k from its stationary distribution, in log space."""
    n = np.arange(states)
    rates = np.minimum(np.arange(1, states), k) * mu
    logp = np.concatenate([[0.0], np.cumsum(np.log(lam / rates))])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return float(p[k:].sum()), float((n * p).sum() / lam)


@pytest.mark.parametrize(("k", "rho"), [(8, 0.9), (1000, 0.95), (3, 0.5)])
def test_mmk_against_brute_force_birth_death(k, rho):
    lam, mu = rho * k, 1.0
    wait, mean = _birth_death(lam, mu, k, states=k + 2000)  # tail beyond ~ rho^2000: nil
    assert theory.erlang_c(k, lam / mu) == pytest.approx(wait, rel=1e-9)
    assert theory.mmk_mean_response(lam, mu, k) == pytest.approx(mean, rel=1e-9)
    if k == 8:
        arrival = theory.poisson_at_load(rho, "exp:1", cpus=k)
        for policy in ("fcfs", "ps", "processor-sharing"):
            got = theory.mean_response(policy, arrival, "exp:1", cpus=k)
            assert got == pytest.approx(mean, rel=1e-9)
        # exp written as erlang:1 or hyperexp with CV 1 is still exponential.
        assert theory.mean_response("fcfs", arrival, "erlang:1,1", cpus=k) == pytest.approx(mean)
        assert theory.mean_response("fcfs", arrival, "hyperexp:1,1", cpus=k) == pytest.approx(
            mean)


def test_multi_cpu_without_closed_form_is_none():
    arrival = theory.poisson_at_load(0.5, "det:1", cpus=4)
    assert theory.mean_response("fcfs", arrival, "det:1", cpus=4) is None
    arrival = theory.poisson_at_load(0.5, "exp:1", cpus=4)
    for policy in ("srpt", "sjf", "fb", "lcfs"):
        assert theory.mean_response(policy, arrival, "exp:1", cpus=4) is None


# --- (c) Cobham's priority classes -------------------------------------------------------------


def test_cobham_two_exp_classes_by_hand():
    # lambda = 0.2, 0.3, both exp:1 (E[S^2] = 2): rho = 0.2, 0.3, s_1 = 0.2, s_2 = 0.5.
    # W0 = (0.2 * 2 + 0.3 * 2) / 2 = 0.5.
    # Non-preemptive: T1 = 1 + 0.5 / (1 * 0.8) = 1.625; T2 = 1 + 0.5 / (0.8 * 0.5) = 2.25.
    #   (Check: rate-weighted mean (0.2 * 1.625 + 0.3 * 2.25) / 0.5 = 2 = M/M/1 at rho 0.5.)
    # Preemptive: T1 = 1 + 0.2 / 0.8 = 1.25 (class 1 alone is M/M/1 at 0.2);
    #   T2 = 1 / 0.8 + 0.5 / (0.8 * 0.5) = 2.5.
    classes = [{"rate": 0.2, "size": "exp:1"}, {"rate": 0.3, "size": "exp:1"}]
    assert theory.priority_classes(classes, preemptive=False) == pytest.approx([1.625, 2.25])
    assert theory.priority_classes(classes, preemptive=True) == pytest.approx([1.25, 2.5])


def test_cobham_mixed_sizes_and_priority_key():
    # Class A det:1 at 0.3 (E[S^2] = 1), class B exp:2 at 0.2 (E[S^2] = 8); A first.
    # rho = 0.3, 0.4; s = 0.3, 0.7; W0 = (0.3 * 1 + 0.2 * 8) / 2 = 0.95.
    # Non-preemptive: A 1 + 0.95 / 0.7 = 2.357143; B 2 + 0.95 / (0.7 * 0.3) = 6.523810.
    # Preemptive: A 1 + 0.15 / 0.7 = 1.214286; B 2 / 0.7 + 0.95 / 0.21 = 7.380952.
    # Given in the other order, with priorities: results come back in the input order.
    classes = [{"rate": 0.2, "size": "exp:2", "priority": 5},
               {"rate": 0.3, "size": "det:1", "priority": -1}]
    assert theory.priority_classes(classes, preemptive=False) == pytest.approx(
        [2 + 0.95 / 0.21, 1 + 0.95 / 0.7], rel=1e-12)
    assert theory.priority_classes(classes, preemptive=True) == pytest.approx(
        [2 / 0.7 + 0.95 / 0.21, 1 + 0.15 / 0.7], rel=1e-12)


def test_cobham_one_class_is_pollaczek_khinchine():
    # det:2 at lambda 0.4 (rho 0.8): P-K 2 + 0.4 * 4 / (2 * 0.2) = 6, preemptive or not.
    for preemptive in (False, True):
        assert theory.priority_classes([{"rate": 0.4, "size": "det:2"}], preemptive) == \
            pytest.approx([6.0], rel=1e-12)


def test_cobham_equal_priorities_are_one_fcfs_class():
    # Both at priority 0: one FCFS queue, M/G/1 with W = (0.2*2 + 0.3*8) / 2 / (1 - 0.8) = 7.
    classes = [{"rate": 0.2, "size": "exp:1", "priority": 0},
               {"rate": 0.3, "size": "exp:2", "priority": 0}]
    for preemptive in (False, True):
        assert theory.priority_classes(classes, preemptive) == pytest.approx([8.0, 9.0])


def test_cobham_unstable_raises():
    with pytest.raises(ValueError, match="unstable"):
        theory.priority_classes([{"rate": 0.6, "size": "exp:1"}, {"rate": 0.5, "size": "exp:1"}],
                                preemptive=True)


# --- (d) Closed systems by MVA -----------------------------------------------------------------


def test_mva_by_hand():
    # One queue D = 1, think Z = 4.
    # N = 1: R = 1, X = 1 / 5 = 0.2, Q = 0.2.
    # N = 2: R = 1 * (1 + 0.2) = 1.2, X = 2 / 5.2 = 0.384615, Q = 0.384615 * 1.2 = 0.461538.
    one = theory.mva(1, 4.0, [1.0])
    assert (one["response"], one["throughput"], one["queue"][0]) == pytest.approx((1, 0.2, 0.2))
    two = theory.mva(2, 4.0, [1.0])
    assert two["response"] == pytest.approx(1.2)
    assert two["throughput"] == pytest.approx(2 / 5.2)
    assert two["queue"][0] == pytest.approx(2 / 5.2 * 1.2)


def test_machine_repairman_against_birth_death():
    # N clients think exp(Z), one exp server of mean D: pi_n ∝ N!/(N-n)! (D/Z)^n.
    n_clients, z, d = 10, 4.0, 1.0
    n = np.arange(n_clients + 1)
    logp = special.gammaln(n_clients + 1) - special.gammaln(n_clients - n + 1) + n * math.log(d / z)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    x = (1 - p[0]) / d
    got = theory.machine_repairman(n_clients, z, d)
    assert got["throughput"] == pytest.approx(x, rel=1e-12)
    assert got["response"] == pytest.approx(n_clients / x - z, rel=1e-12)
    assert got["queue"][0] == pytest.approx(float((n * p).sum()), rel=1e-12)


def test_mva_large_population_asymptote():
    # Bottleneck D_max = 1: X -> 1 / D_max, R -> N D_max - Z; the other queue is then an
    # open M/M/1 at 0.5, holding 0.5 / (1 - 0.5) = 1 job; a delay station holds X * D = 0.5.
    got = theory.mva(200, 4.0, [1.0, 0.5, 0.5], kinds=["queue", "queue", "delay"])
    assert got["throughput"] == pytest.approx(1.0, rel=1e-12)
    assert got["response"] == pytest.approx(196.0, rel=1e-12)
    assert got["queue"][1:] == pytest.approx([1.0, 0.5], rel=1e-9)


def test_a_closed_interactive_system_on_k_cpus_against_its_markov_chain():
    # By hand: 2 clients thinking exp:1, one CPU, exp:1 jobs. P(0..2) = 1, 2, 2 over 5, so
    # X = 4/5 and R = 2 / 0.8 - 1 = 1.5 ms.
    assert theory.closed_mean_response("fcfs", 2, "exp:1", "exp:1") == pytest.approx(1.5)
    # 5 clients (think exp:3) on 2 CPUs (exp:1 jobs): the continuous-time chain of the jobs at
    # the CPUs, solved as a linear system pi Q = 0 (not the product of ratios the code uses).
    n, z, k = 5, 3.0, 2
    q = np.zeros((n + 1, n + 1))
    for i in range(n + 1):
        if i < n:
            q[i, i + 1] = (n - i) / z
        if i > 0:
            q[i, i - 1] = min(i, k) / 1.0
        q[i, i] = -q[i].sum()
    a = np.vstack([q.T, np.ones(n + 1)])
    pi = np.linalg.lstsq(a, np.r_[np.zeros(n + 1), 1.0], rcond=None)[0]
    x = float(sum(pi[i] * min(i, k) for i in range(n + 1)))
    want = n / x - z
    for policy, size in (("fcfs", "exp:1"), ("ps", "exp:1"), ("rr", "exp:1")):
        got = theory.closed_mean_response(policy, n, "exp:3", size, cpus=k)
        assert got == pytest.approx(want, rel=1e-12), policy
    # Insensitive: PS with any sizes and any think law of the same means gives the same.
    assert theory.closed_mean_response("ps", n, "uniform:2,4", "hyperexp:1,3", cpus=k) == \
        pytest.approx(want, rel=1e-12)
    # One CPU: the machine repairman, MVA's recursion.
    assert theory.closed_mean_response("lcfs", 10, "exp:4", "det:1") == pytest.approx(
        theory.machine_repairman(10, 4.0, 1.0)["response"], rel=1e-12)
    # Saturated: study 002's Linux.2.a, n tc / m - tw (7 x 250 / 2 - 10 = 865).
    assert theory.closed_mean_response("ps", 7, "uniform:9,11", "det:250", cpus=2) == \
        pytest.approx(865.0, rel=1e-6)
    # No think time: every client is always at the CPUs, R = n E[S] / min(n, k).
    assert theory.closed_mean_response("fcfs", 3, "det:0", "exp:2", cpus=2) == 3.0
    # No product form: FCFS with sizes that are not exponential, SRPT, a finite quantum,
    # preemptive LCFS on several CPUs, and clients kept in step by constant think and sizes.
    for policy, think, size, cpus, params in (
            ("fcfs", "exp:1", "det:1", 1, {}), ("srpt", "exp:1", "exp:1", 1, {}),
            ("rr", "exp:1", "exp:1", 1, {"quantum": 10}), ("lcfs", "exp:1", "exp:1", 2, {}),
            ("ps", "det:5", "det:1", 1, {})):
        assert theory.closed_mean_response(policy, 4, think, size, cpus, **params) is None
    # A spec: the same, with the engine's defaults (rr's quantum 10: none), and none for a
    # run of no more jobs than clients (a batch of one-shot processes) or any quantile.
    spec = {"policy": "ps", "clients": n, "think": "exp:3", "size": "exp:1", "cpus": k,
            "jobs": 100_000, "warmup": "auto"}
    assert theory.spec_mean(spec) == pytest.approx(want, rel=1e-12)
    assert theory.spec_mean({**spec, "policy": "rr"}) is None
    assert theory.spec_mean({**spec, "jobs": n}) is None
    assert theory.spec_mean({**spec, "runqueues": "per-cpu"}) is None
    assert theory.spec_quantile(spec, 0.5) is None
    # From Python and the command line, with their messages for bad input.
    out = schedlab.theory("ps", "exp:1", clients=n, think="exp:3", cpus=k, quantiles=0.9)
    assert out["mean"] == pytest.approx(want, rel=1e-12)
    assert (out["clients"], out["think"], out["quantiles"]) == (n, "exp:3", {"p90": None})
    assert "arrival" not in out
    for kwargs, text in ((dict(clients=0),
                          "clients = 0: expected a whole number from 1 to 10000000"),
                         (dict(think="exp:1"), 'think = "exp:1": expected clients as well'),
                         # A load beside think but no clients: the clients are what is missing.
                         (dict(think="exp:1", load=0.5),
                          'think = "exp:1": expected clients as well (think time is for '
                          'closed workloads)'),
                         (dict(clients=3, load=0.5), "load = 0.5: expected nothing beside "
                          "clients")):
        with pytest.raises(SpecError, match=re.escape(text)):
            schedlab.theory("ps", "exp:1", **kwargs)
    cli = subprocess.run([SCHEDLAB, "theory", "--policy", "ps", "--size", "det:250",
                          "--clients", "7", "--think", "uniform:9,11", "--cpus", "2"],
                         capture_output=True, text=True, env=cli_env())
    assert (cli.returncode, cli.stdout) == (0, "mean 865 ms\n")
    cli = subprocess.run([SCHEDLAB, "theory", "--policy", "ps", "--clients", "3", "--arrival",
                          "exp:2"], capture_output=True, text=True, env=cli_env())
    assert cli.returncode == 2 and "arrival = \"exp:2\": expected nothing beside clients" \
        in cli.stderr


# --- (e) M/M/1 quantiles -----------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.5, 0.95, 0.99])
def test_mm1_quantile(p):
    # T ~ exp(mu - lambda) = exp(rate 0.1): P(T <= t) = 1 - e^{-0.1 t} = p.
    t = theory.mm1_quantile(p, 0.9, 1.0)
    assert 1 - math.exp(-0.1 * t) == pytest.approx(p, rel=1e-12)
    assert t == pytest.approx({0.5: 10 * math.log(2), 0.95: 10 * math.log(20),
                               0.99: 10 * math.log(100)}[p], rel=1e-12)


# --- (f) Bad inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("arrival", ["det:2", "uniform:1,3", "erlang:2,2", "hyperexp:2,3"])
def test_non_poisson_arrivals_have_no_closed_form(arrival):
    assert theory.mean_response("fcfs", arrival, "exp:1") is None
    assert theory.conditional_response("srpt", arrival, "exp:1", 1.0) is None


@pytest.mark.parametrize("policy", ["mlfq", "lottery", "stride", "cfs", "edf", "priority",
                                    "gps"])
def test_policies_without_closed_form(policy):
    assert theory.mean_response(policy, "exp:2", "exp:1") is None


def test_a_question_the_command_line_refuses_is_refused_in_python_too():
    # An unknown policy was None (no closed form) and a parameter the policy does not have
    # was ignored, where `schedlab theory` refused both: one check now, in the theory.
    from schedlab import SpecError

    for call, text in (
            (lambda: theory.mean_response("no-such-policy", "exp:2", "exp:1"),
             "policy = no-such-policy: expected one of fcfs"),
            (lambda: theory.mean_response("fcfs", "exp:2", "exp:1", quantum=3),
             "quantum = 3: expected no quantum: fcfs has none"),
            (lambda: theory.response_quantile("rr", "exp:2", "exp:1", 0.9, quantum=0),
             "quantum = 0: expected a number > 0"),
            (lambda: theory.mean_response("fcfs", "exp:2", "exp:1", cpus="2"),
             'cpus = "2": expected a whole number from 1 to 65536'),
            # Plain ValueErrors and a TypeError before, and "maybe" read as true.
            (lambda: theory.response_quantile("fcfs", "exp:2", "exp:1", 1.5),
             "p = 1.5: expected a probability strictly between 0 and 1"),
            (lambda: theory.response_cdf("fcfs", "exp:2", "exp:1", "a"),
             'x = "a": expected a number or an array of numbers'),
            (lambda: theory.spec_mean("fcfs"), 'spec = "fcfs": expected a table of a run\'s keys'),
            (lambda: theory.mean_response("lcfs", "exp:2", "exp:1", preemptive="maybe"),
             'preemptive = "maybe": expected true or false'),
            # A parameter's value by the simulator's rule (levels = -3 gave None, and the
            # command line "no closed form" with exit 1).
            (lambda: theory.mean_response("mlfq", "exp:21", "det:20", levels=-3),
             "levels = -3: expected a whole number >= 1"),
            (lambda: theory.mean_response("cfs", "exp:2", "exp:1", latency=-5),
             "latency = -5: expected a number > 0"),
            # The question's own argument is not "no theory" (spec_quantile gave None).
            (lambda: theory.spec_quantile({"policy": "fcfs", "arrival": "exp:2",
                                           "size": "exp:1"}, 2),
             "p = 2: expected a probability strictly between 0 and 1"),
            (lambda: theory.conditional_response("ps", "exp:2", ["exp:1"], 1.0),
             "size = ['exp:1']: expected a distribution")):
        with pytest.raises(SpecError) as e:
            call()
        assert str(e.value).startswith(text), str(e.value)
    # Aliases and a bare number (a constant) are taken as everywhere else.
    assert theory.mean_response("processor-sharing", "exp:2", "exp:1") == pytest.approx(2.0)
    assert theory.mean_response("fifo", "exp:2", 1) == pytest.approx(
        theory.mean_response("fcfs", "exp:2", "det:1"))


def test_quantum_means_no_closed_form():
    assert theory.mean_response("rr", "exp:2", "exp:1", quantum=10) is None
    assert theory.mean_response("fb", "exp:2", "exp:1", quantum=1) is None


def test_rr_with_a_quantum_no_job_outgrows_is_fcfs():
    # Study 002's rr-ps-fcfs at quantum 20 and 40 (every job 20 ms): each job ends in its first
    # turn, in arrival order. M/D/1 by hand: 20 + (1/21) 400 / (2 (1 - 20/21)) = 220.
    for quantum in (20, 40):
        assert theory.mean_response("rr", "exp:21", "det:20", quantum=quantum) == \
            pytest.approx(220.0, rel=1e-12)
    assert theory.mean_response("rr", "exp:21", "det:20", quantum=19.9) is None
    # The end of the support decides: uniform up to 5 (P-K with E[S] = 3, E[S^2] = 31/3 at
    # rate 1/6: 3 + (31/18) / (2 * 0.5) = 4.7222...), bounded Pareto up to 100.
    assert theory.mean_response("rr", "exp:6", "uniform:1,5", quantum=5) == \
        pytest.approx(3 + (31 / 18) / 1.0, rel=1e-12)
    assert theory.mean_response("rr", "exp:6", "uniform:1,5", quantum=4.99) is None
    assert theory.mean_response("rr", "exp:40", "bpareto:1.5,1,100", quantum=100) == \
        pytest.approx(theory.mean_response("fcfs", "exp:40", "bpareto:1.5,1,100"), rel=1e-12)
    assert theory.mean_response("rr", "exp:4", "exp:1", quantum=1e9) is None  # unbounded
    # The distribution too, and the answer says why.
    assert theory.response_quantile("rr", "exp:21", "det:20", [0.5, 0.99], quantum=20) == \
        pytest.approx(theory.response_quantile("fcfs", "exp:21", "det:20", [0.5, 0.99]))
    out = theory.answer("rr", "det:20", arrival="exp:21", quantum=20)
    assert out["mean"] == pytest.approx(220.0) and "rr is fcfs" in out["note"]


@pytest.mark.parametrize(("arrival", "cpus"), [("exp:1", 1), ("exp:0.9", 1), ("exp:0.25", 4)])
def test_unstable_raises(arrival, cpus):
    with pytest.raises(ValueError, match="unstable"):
        theory.mean_response("fcfs", arrival, "exp:1", cpus=cpus)
    with pytest.raises(ValueError, match="unstable"):
        theory.mm1_quantile(0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="unstable"):
        theory.erlang_c(2, 2.0)


@pytest.mark.parametrize("size", ["gauss:1", "exp:-1", "bpareto:1,1,10", "empirical:/nonexistent"])
def test_bad_distribution_text_raises_spec_error(size):
    with pytest.raises(SpecError) as info:
        theory.mean_response("fcfs", "exp:2", size)
    assert info.value.key == "size"
    with pytest.raises(SpecError) as info:
        theory.mean_response("fcfs", size, "exp:1")
    assert info.value.key == "arrival"


def test_bad_load_raises_spec_error():
    with pytest.raises(SpecError):
        theory.poisson_at_load(0.0, "exp:1")
    with pytest.raises(SpecError):
        theory.poisson_at_load(0.5, "det:0")


def test_conditional_response_takes_arrays_and_rejects_negative_sizes(two_sizes):
    got = theory.conditional_response("srpt", "exp:4", two_sizes, np.array([1.0, 3.0]))
    assert got == pytest.approx(TWO_SIZES["srpt"], rel=1e-12)
    with pytest.raises(ValueError, match="x >= 0"):
        theory.conditional_response("ps", "exp:4", two_sizes, -1.0)
