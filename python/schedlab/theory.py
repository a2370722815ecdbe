"""Closed forms of queueing theory, drawn beside every measurement where they apply.

Notation: Poisson arrivals at rate lambda, job size S with cdf F, partial moments
m_k(x) = integral_0^x t^k dF(t), load of jobs no larger than x rho(x) = lambda m_1(x) (rho(x-)
counts jobs strictly smaller than x), rho = lambda E[S]. One CPU unless stated.

Mean response time E[T], and E[T(x)] for a job of size x (Harchol-Balter, *Performance Modeling
and Design of Computer Systems*, 2013: ch. 23 for P-K, ch. 30-33 for the size-based policies):

- FCFS, M/G/1 (Pollaczek-Khinchine): E[T] = E[S] + lambda E[S^2] / (2 (1 - rho)).
  Non-preemptive LCFS has the same mean.
- PS and preemptive-resume LCFS, M/G/1 (insensitive): E[T(x)] = x / (1 - rho).
  RR without a quantum is PS; RR with a quantum no job outgrows is FCFS.
- SRPT (Schrage and Miller, Oper. Res. 14, 1966):
  E[T(x)] = lambda (m_2(x) + x^2 (1 - F(x))) / (2 (1 - rho(x)) (1 - rho(x-)))
            + integral_0^x dt / (1 - rho(t)).
- PSJF: E[T(x)] = x / (1 - rho(x-)) + lambda m_2(x) / (2 (1 - rho(x)) (1 - rho(x-))).
- SJF, non-preemptive: E[T(x)] = x + lambda E[S^2] / (2 (1 - rho(x-)) (1 - rho(x))).
- FB / LAS: E[T(x)] = (x (1 - rho_x) + lambda E[min(S, x)^2] / 2) / (1 - rho_x)^2 with
  rho_x = lambda E[min(S, x)].
  Where F is continuous rho(x-) = rho(x) and these are the textbook forms. At a point mass the
  left and right limits differ: equal sizes are served FCFS, so a tagged job waits behind earlier
  jobs of its own size (rho(x)) but only later *smaller* jobs overtake it (rho(x-)). With
  deterministic sizes SRPT, PSJF and SJF thus reduce to FCFS, as they must.
- M/M/k FCFS (Erlang C): E[T] = C(k, a) / (k mu - lambda) + 1 / mu, a = lambda / mu, C computed
  from the Erlang B recursion B(n) = a B(n-1) / (n + a B(n-1)), C = k B / (k - a (1 - B)).
  M/M/k-PS (n jobs share k CPUs at rate min(1, k/n) each) is the same birth-death chain, so it has
  the same mean.
- M/M/1 FCFS response-time quantile: T is exponential with rate mu - lambda.
- Priority classes, M/G/1 (Cobham, Oper. Res. 2, 1954; Harchol-Balter ch. 31), classes in priority
  order, s_k = sum_{i<=k} rho_i:
  non-preemptive T_k = E[S_k] + W0 / ((1 - s_{k-1}) (1 - s_k)), W0 = sum_all lambda_i E[S_i^2]/2;
  preemptive-resume T_k = E[S_k] / (1 - s_{k-1})
                          + (sum_{i<=k} lambda_i E[S_i^2] / 2) / ((1 - s_{k-1}) (1 - s_k)).
- Closed networks by exact Mean Value Analysis (Reiser and Lavenberg, JACM 27, 1980):
  R_i(n) = D_i (1 + Q_i(n-1)) at a queue, D_i at a delay station; X(n) = n / (Z + sum R_i(n));
  Q_i(n) = X(n) R_i(n).

Response-time distributions P(T <= x) and their quantiles (`response_cdf`, `response_quantile`):

- M/M/k FCFS: P(W > t) = C(k, a) e^{-(k mu - lambda) t} (Erlang C), T = W + S, closed form.
- M/G/1 FCFS, every size law: T*(s) = (1 - rho) s S*(s) / (s - lambda (1 - S*(s))) (P-K),
  inverted numerically (Abate-Whitt Fourier series with Euler summation) after the first terms
  of its Benes series, which hold the jumps and kinks, are computed exactly (see _FcfsMG1).
  S*(s) is closed-form for det, exp, uniform, erlang, hyperexp and empirical, and Gauss-Legendre
  quadrature over complex s for lognormal and bpareto.
- M/M/1 PS: Coffman, Muntz and Trotter (JACM 17, 1970), averaged over exponential sizes.
- M/D/1 PS: the transform derived in _PsMD1 (branching over the tagged job's remaining work).
Accuracy of the cdf, measured against closed forms and independent methods: 1e-11 to 1e-8
absolute (the table in docs/theory.md).

Size distributions come from `schedlab._core.parse_dist`, with the simulator's definitions. The
integrals over F use closed-form partial moments and Gauss-Legendre rules on quantile- and
log-spaced pieces (accurate to ~1e-9 relative); point masses (det, empirical) are exact sums.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from scipy import special

import schedlab._core as _core
from schedlab._core import SpecError
from schedlab.command import callable_module
from schedlab.vocabulary import (
    Params,
    as_dist,
    find_policy,
    param_defaults,
    param_value,
    quoted,
    spec_error,
    whole_number,
)

__all__ = [
    "COVERED",
    "answer",
    "closed_forms",
    "conditional_response",
    "erlang_c",
    "machine_repairman",
    "mean_response",
    "mm1_quantile",
    "mmk_mean_response",
    "mva",
    "poisson_at_load",
    "priority_classes",
    "response_cdf",
    "response_quantile",
    "spec_cdf",
    "spec_mean",
    "spec_model",
    "spec_quantile",
]

# Which closed forms exist, by canonical policy name; used by the docs. Any other combination
# (other policies, non-Poisson arrivals, cpus > 1 beyond these) has none: the functions return None.
COVERED: dict[str, str] = {
    "fcfs": "M/G/1 (Pollaczek-Khinchine); M/M/k (Erlang C); distribution: M/M/k (Erlang C "
            "waiting-time law), M/G/1 for every size law (P-K transform, inverted)",
    "lcfs": "M/G/1 preemptive-resume: E[S]/(1-rho); non-preemptive: as FCFS",
    "ps": "M/G/1: E[S]/(1-rho); M/G/k-PS (any sizes: insensitive): M/M/k FCFS's mean; "
          "distribution: M/M/1 "
          "(Coffman-Muntz-Trotter), M/D/1",
    "rr": "without a quantum: as PS; with a quantum at least the largest size: as FCFS",
    "srpt": "M/G/1 (Schrage-Miller); distribution: deterministic sizes, as FCFS",
    "psjf": "M/G/1 (Harchol-Balter ch. 32); distribution: deterministic sizes, as FCFS",
    "sjf": "M/G/1 non-preemptive (Cobham with classes by size); distribution: deterministic "
           "sizes, as FCFS",
    "fb": "M/G/1, fluid (no quantum) (Harchol-Balter ch. 33)",
    "priority": "M/G/1 by class, preemptive or not (Cobham): priority_classes()",
    "closed": "product-form closed networks by exact MVA: mva(), machine_repairman(); a "
              "closed interactive system (clients, think) on k CPUs under ps, rr without a "
              "quantum, fcfs with exponential sizes or lcfs on one CPU: "
              "closed_mean_response()",
    "distribution": "P(T <= x) and quantiles: response_cdf(), response_quantile(), for the "
                    "cases marked 'distribution' above",
}

# Aliases as the core's catalogue spells them; the catalogue is consulted too, so a new alias
# there needs no change here.
_ALIASES = {
    "fifo": "fcfs", "srtf": "srpt", "las": "fb", "sff": "sjf", "spt": "sjf",
    "lcfs-pr": "lcfs", "lifo": "lcfs", "processor-sharing": "ps", "round-robin": "rr",
}

# Gauss-Legendre nodes per piece: the pieces are small enough that 20 nodes are exact to ~1e-12.
_GL_T, _GL_W = np.polynomial.legendre.leggauss(20)
# Quantiles that cut each continuous size distribution into pieces of comparable mass.
_QUANTILES = np.array([1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 1e-2, 0.05, *np.arange(0.1, 0.95, 0.1),
                       0.95, 0.99, 0.999, 1 - 1e-4, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12])
_MAX_RATIO = 1.5  # neighbouring breakpoints at most this far apart (log-spaced pieces)
# Size transforms by quadrature: e^{-sx} is dropped where Re(s) x > _CUT (e^-40 ~ 4e-18), and a
# 20-node Gauss-Legendre piece spans at most _PHASE radians of its oscillation (error ~1e-17).
_CUT = 40.0
_PHASE = 12.0


def _canonical(policy: str) -> str:
    name = policy.strip().lower().replace("_", "-")
    return _alias_map().get(name, name)


@cache
def _alias_map() -> dict[str, str]:
    names = dict(_ALIASES)
    for p in _core.policies():
        names.update({a: p["name"] for a in p["aliases"]})
    return names


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "off", "")
    return bool(value)


def _clog1p(z: np.ndarray) -> np.ndarray:
    """log(1 + z) for complex z, accurate for small |z| (numpy's complex log1p is not)."""
    z = np.asarray(z, dtype=complex)
    small = np.abs(z) < 0.25
    zs = np.where(small, z, 0)
    acc = np.zeros_like(zs)
    for n in range(32, 0, -1):  # log1p(z) = z (1 - z (1/2 - z (1/3 - ...)))
        acc = 1 / n - zs * acc
    return np.where(small, zs * acc, np.log(1 + np.where(small, 0, z)))


# ---------------------------------------------------------------------------------------------
# Size distributions
# ---------------------------------------------------------------------------------------------


class _Part:
    """A continuous component: density, survival, partial moments, quantiles, support."""

    lo: float = 0.0
    hi: float = math.inf

    def pdf(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def sf(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def partial(self, k: int, x: np.ndarray) -> np.ndarray:
        """integral_0^x t^k f(t) dt, for x up to +inf."""
        raise NotImplementedError

    def ppf(self, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def lst(self, s: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E[e^{-sS}] and 1 - E[e^{-sS}] for a 1-D array of complex s with Re s > 0.

        By Gauss-Legendre quadrature on the pieces `ends` (this part's breaks), cut where
        e^{-Re(s) x} < 4e-18 and subdivided so that no piece holds more than _PHASE radians of
        e^{-sx}: 20 nodes integrate such a piece to the rounding error. The complement is
        integrated as E[-expm1(-sS)] so that it keeps its digits when s is small.
        """
        cut = _CUT / float(s.real.min())
        if cut < ends[-1]:
            ends = np.append(ends[ends < cut], cut)
        tail = float(self.sf(np.array(ends[-1])))  # beyond: e^{-sx} ~ 0 (or no mass)
        if len(ends) < 2:
            return np.zeros(s.shape, complex), np.full(s.shape, tail, complex)
        n = np.maximum(1, np.ceil(float(np.abs(s).max()) * np.diff(ends) / _PHASE)).astype(int)
        fine = np.concatenate([np.linspace(a, b, k + 1)[:-1]
                               for a, b, k in zip(ends[:-1], ends[1:], n, strict=True)]
                              + [ends[-1:]])
        x, wt = _Size._nodes(fine, 20)
        wp = wt * self.pdf(x)
        inside = -np.expm1(-np.multiply.outer(s, x)) @ wp  # one transcendental per node
        return wp.sum() - inside, inside + tail

    def breaks(self) -> np.ndarray:
        """Sorted piece ends covering the support, or, when it is unbounded, up to a point beyond
        which the part holds less than 1e-15 of its mass and of its mean (all the integrands
        here grow at most linearly in x, so what lies beyond is below the rounding error)."""
        pts = self.ppf(_QUANTILES)
        pts = list(pts[np.isfinite(pts)])
        if math.isfinite(self.hi):
            pts.append(self.hi)
        else:
            end, mean = max(pts), float(self.partial(1, np.inf))
            while (float(self.sf(end)) > 1e-15
                   or mean - float(self.partial(1, end)) > 1e-15 * mean):
                end *= _MAX_RATIO
            pts.append(end)
        pts = np.unique(np.concatenate([[self.lo], pts]))
        # Fill wide gaps geometrically: heavy tails need pieces of bounded ratio, not mass.
        out = [pts[0]]
        for b in pts[1:]:
            a = out[-1]
            if a > 0 and b / a > _MAX_RATIO:
                n = math.ceil(math.log(b / a) / math.log(_MAX_RATIO))
                out.extend(np.geomspace(a, b, n + 1)[1:-1])
            out.append(b)
        return np.asarray(out)


class _Gamma(_Part):
    """Gamma(shape k, scale theta): exp is k = 1, erlang:K,MEAN is k = K, theta = MEAN/K."""

    def __init__(self, k: float, theta: float) -> None:
        self.k, self.theta = k, theta

    def pdf(self, x: np.ndarray) -> np.ndarray:
        z = np.maximum(x, 0) / self.theta
        with np.errstate(divide="ignore"):
            logp = special.xlogy(self.k - 1, z) - z - special.gammaln(self.k)
        return np.where(x >= 0, np.exp(logp) / self.theta, 0.0)

    def sf(self, x: np.ndarray) -> np.ndarray:
        return special.gammaincc(self.k, np.maximum(x, 0) / self.theta)

    def partial(self, k: int, x: np.ndarray) -> np.ndarray:
        return (self.theta**k * special.poch(self.k, k)
                * special.gammainc(self.k + k, np.maximum(x, 0) / self.theta))

    def ppf(self, q: np.ndarray) -> np.ndarray:
        return self.theta * special.gammaincinv(self.k, q)

    def lst(self, s: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # (1 + theta s)^-k, and its complement by expm1 of an accurate log1p.
        e = -self.k * _clog1p(self.theta * s)
        return np.exp(e), -np.expm1(e)


class _LogNormal(_Part):
    def __init__(self, mu: float, sigma: float) -> None:
        self.mu, self.sigma = mu, sigma

    def _z(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return (np.log(np.maximum(x, 0)) - self.mu) / self.sigma

    def pdf(self, x: np.ndarray) -> np.ndarray:
        z = self._z(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.exp(-0.5 * z * z) / (np.maximum(x, 0) * self.sigma * math.sqrt(2 * math.pi))
        return np.where(x > 0, p, 0.0)

    def sf(self, x: np.ndarray) -> np.ndarray:
        return special.ndtr(-self._z(x))

    def partial(self, k: int, x: np.ndarray) -> np.ndarray:
        s = self.sigma
        return math.exp(k * self.mu + k * k * s * s / 2) * special.ndtr(self._z(x) - k * s)

    def ppf(self, q: np.ndarray) -> np.ndarray:
        return np.exp(self.mu + self.sigma * special.ndtri(q))


class _Uniform(_Part):
    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def pdf(self, x: np.ndarray) -> np.ndarray:
        return np.where((x >= self.lo) & (x <= self.hi), 1 / (self.hi - self.lo), 0.0)

    def sf(self, x: np.ndarray) -> np.ndarray:
        return np.clip((self.hi - x) / (self.hi - self.lo), 0, 1)

    def partial(self, k: int, x: np.ndarray) -> np.ndarray:
        c = np.clip(x, self.lo, self.hi)
        return (c ** (k + 1) - self.lo ** (k + 1)) / ((k + 1) * (self.hi - self.lo))

    def ppf(self, q: np.ndarray) -> np.ndarray:
        return self.lo + q * (self.hi - self.lo)

    def lst(self, s: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # e^{-s lo} g(u), g(u) = (1 - e^{-u}) / u, u = s (hi - lo); 1 - g(u) by its series
        # where u is small.
        u = s * (self.hi - self.lo)
        small = np.abs(u) < 0.5
        us = np.where(small, u, 0)
        acc = np.zeros_like(us)
        for n in range(24, 0, -1):  # 1 - g(u) = sum_{n>=1} (-1)^{n+1} u^n / (n+1)!
            acc = 1 / math.factorial(n + 1) - us * acc
        ul = np.where(small, 1, u)
        one_minus_g = np.where(small, us * acc, (ul + np.expm1(-ul)) / ul)
        shift = np.exp(-s * self.lo)
        return shift * (1 - one_minus_g), -np.expm1(-s * self.lo) + shift * one_minus_g


class _BPareto(_Part):
    """Bounded Pareto on [lo, hi]: F(x) = (1 - (lo/x)^alpha) / (1 - (lo/hi)^alpha)."""

    def __init__(self, alpha: float, lo: float, hi: float) -> None:
        self.alpha, self.lo, self.hi = alpha, lo, hi
        self.norm = -math.expm1(alpha * math.log(lo / hi))  # 1 - (lo/hi)^alpha, no cancellation

    def pdf(self, x: np.ndarray) -> np.ndarray:
        inside = (x >= self.lo) & (x <= self.hi)
        c = np.clip(x, self.lo, self.hi)
        return np.where(inside, self.alpha * self.lo**self.alpha * c ** (-self.alpha - 1)
                        / self.norm, 0.0)

    def sf(self, x: np.ndarray) -> np.ndarray:
        c = np.clip(x, self.lo, self.hi)
        return ((self.lo / c) ** self.alpha - (self.lo / self.hi) ** self.alpha) / self.norm

    def partial(self, k: int, x: np.ndarray) -> np.ndarray:
        # alpha lo^k / norm * integral_0^u e^{(k-alpha) v} dv with u = ln(x/lo): expm1 keeps
        # digits near lo, and k = alpha (e.g. alpha = 2) is the logarithmic case.
        u = np.log(np.clip(x, self.lo, self.hi) / self.lo)
        a = k - self.alpha
        inner = u if abs(a) < 1e-12 else np.expm1(a * u) / a
        return self.alpha * self.lo**k / self.norm * inner

    def ppf(self, q: np.ndarray) -> np.ndarray:
        return self.lo * (1 - q * self.norm) ** (-1 / self.alpha)


class _Size:
    """A size distribution as point masses plus weighted continuous parts.

    Gives E[S^k], F, the survival P(S > x), partial moments m_k(x) (m_k(x-) with strict=True),
    `expect(g)` = E[g(S)] and `integrate_dt(h, upper)`, both exact for point masses.
    """

    def __init__(self, info: dict[str, Any]) -> None:
        self.text: str = info["written"]
        self.name: str = info["name"]
        p = list(info["params"])
        atoms: np.ndarray = np.empty(0)
        self.parts: list[tuple[float, _Part]] = []
        if self.name == "det":
            atoms = np.array([p[0]])
        elif self.name == "empirical":
            atoms = np.asarray(info["values"], dtype=float)  # equally likely, repeats add up
        elif self.name == "uniform":
            if p[0] == p[1]:
                atoms = np.array([p[0]])
            else:
                self.parts = [(1.0, _Uniform(p[0], p[1]))]
        elif self.name == "exp":
            self.parts = [(1.0, _Gamma(1, p[0]))]
        elif self.name == "erlang":
            self.parts = [(1.0, _Gamma(p[0], p[1] / p[0]))]
        elif self.name == "hyperexp":
            mean, c2 = p[0], p[1] ** 2
            q = 0.5 * (1 + math.sqrt((c2 - 1) / (c2 + 1)))
            self.parts = [(q, _Gamma(1, mean / (2 * q))), (1 - q, _Gamma(1, mean / (2 * (1 - q))))]
        elif self.name == "lognormal":
            s2 = math.log1p(p[1] ** 2)
            self.parts = [(1.0, _LogNormal(math.log(p[0]) - s2 / 2, math.sqrt(s2)))]
        elif self.name == "bpareto":
            self.parts = [(1.0, _BPareto(*p))]
        else:
            raise ValueError(f"size = {self.text}: no moments known for distribution {self.name}")
        self.xs, counts = np.unique(atoms, return_counts=True)
        self.ps = counts / max(len(atoms), 1)
        # cum[k][i] = sum over the i smallest atoms of p x^k; tail[i] = mass of atoms i, i+1, ...
        self._cum = [np.concatenate([[0.0], np.cumsum(self.ps * self.xs**k)]) for k in range(4)]
        self._tail = np.concatenate([np.cumsum(self.ps[::-1])[::-1], [0.0]])
        # Piece ends: per part for E[g(S)]; from 0 over the whole support for dt integrals.
        self._breaks = [part.breaks() for _, part in self.parts]
        self._ends = np.unique(np.concatenate([np.zeros(1), self.xs, *self._breaks]))
        self.mean = self.moment(1)
        self.second = self.moment(2)
        self.third = self.moment(3)

    @classmethod
    def parse(cls, text: str, key: str = "size") -> _Size:
        return cls(_core.parse_dist(text, key))

    @property
    def constant(self) -> bool:
        """Whether every value is the same (det:X, or an empirical law of one value)."""
        return not self.parts and len(self.xs) == 1

    @property
    def largest(self) -> float:
        """The end of the support: the largest size a job can have (inf when unbounded)."""
        ends = [part.hi for _, part in self.parts] + [float(x) for x in self.xs]
        return max(ends)

    @property
    def exponential(self) -> bool:
        """Exponential: exp, erlang with K = 1, hyperexp with CV = 1 (two equal phases)."""
        parts = [part for _, part in self.parts]
        return (not len(self.xs) and bool(parts)
                and all(isinstance(q, _Gamma) and q.k == 1 and q.theta == parts[0].theta
                        for q in parts))

    def m(self, k: int, x: Any, strict: bool = False) -> np.ndarray:
        """m_k(x) = E[S^k; S <= x], or E[S^k; S < x] with strict."""
        x = np.asarray(x, dtype=float)
        idx = np.searchsorted(self.xs, x, side="left" if strict else "right")
        out = self._cum[k][idx]
        for w, part in self.parts:
            out = out + w * part.partial(k, x)
        return out

    def cdf(self, x: Any) -> np.ndarray:
        return self.m(0, x)

    def sf(self, x: Any) -> np.ndarray:
        """P(S > x), computed from the right so that tiny tails keep their digits."""
        x = np.asarray(x, dtype=float)
        out = self._tail[np.searchsorted(self.xs, x, side="right")]
        for w, part in self.parts:
            out = out + w * part.sf(x)
        return out

    def moment(self, k: int) -> float:
        return float(self.m(k, math.inf))

    @staticmethod
    def _nodes(ends: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = ends[:-1, None], ends[1:, None]
        if order == 1:  # midpoints: exact for the piecewise-constant integrands of point masses
            return ((a + b) / 2).ravel(), (b - a).ravel()
        half = (b - a) / 2
        return (a + half * (1 + _GL_T)).ravel(), (half * _GL_W).ravel()

    def expect(self, g: Callable[[np.ndarray], np.ndarray]) -> float:
        """E[g(S)]: a sum over point masses plus integrals over the continuous parts."""
        total = float(np.sum(self.ps * g(self.xs))) if len(self.xs) else 0.0
        for (w, part), ends in zip(self.parts, self._breaks, strict=True):
            x, wt = self._nodes(ends, 20)
            total += w * float(np.sum(wt * g(x) * part.pdf(x)))
        return total

    def integrate_dt(self, h: Callable[[np.ndarray], np.ndarray], upper: float = math.inf) -> float:
        """integral_0^upper h(t) dt, over the support at most (h is taken as 0 beyond it).

        Between point masses the integrands here are constant, so midpoints are exact.
        """
        ends = self._ends
        if math.isfinite(upper):
            ends = np.unique(np.append(ends[ends < upper], upper))
        if len(ends) < 2:
            return 0.0
        x, wt = self._nodes(ends, 20 if self.parts else 1)
        return float(np.sum(wt * h(x)))

    @property
    def lowest(self) -> float:
        """The left end of the support."""
        return min([*self.xs[:1], *(part.lo for _, part in self.parts)])

    def lst(self, s: Any) -> tuple[np.ndarray, np.ndarray]:
        """The Laplace-Stieltjes transform S*(s) = E[e^{-sS}] and 1 - S*(s), for complex s with
        Re s > 0 (any shape; rows of the last axis share the quadrature, so put the Euler nodes of
        one time point in one row)."""
        s = np.asarray(s, dtype=complex)
        rows = s.reshape(-1, s.shape[-1] if s.ndim else 1)
        val = np.zeros(rows.shape, complex)
        comp = np.zeros(rows.shape, complex)
        for i, row in enumerate(rows):
            if len(self.xs):
                sx = np.multiply.outer(row, self.xs)
                val[i] += np.exp(-sx) @ self.ps
                comp[i] += -np.expm1(-sx) @ self.ps
            for (w, part), ends in zip(self.parts, self._breaks, strict=True):
                v, c = part.lst(row, ends)
                val[i] += w * v
                comp[i] += w * c
        return val.reshape(s.shape), comp.reshape(s.shape)


# ---------------------------------------------------------------------------------------------
# M/G/1 and M/M/k
# ---------------------------------------------------------------------------------------------


def poisson_at_load(load: float, size: str, cpus: int = 1) -> str:
    """The Poisson arrival text `exp:MEAN` giving utilisation `load` per CPU."""
    if isinstance(load, bool) or not isinstance(load, numbers.Real) or \
            not (math.isfinite(load) and load > 0):
        raise spec_error("load", quoted(load), "a utilisation > 0")
    whole_number("cpus", cpus, 1, _core.MAX_CPUS)
    es = float(_core.parse_dist(size, "size")["mean"])
    if es <= 0:
        raise spec_error("size", size, "a mean size > 0 to derive arrivals from a load")
    mean_gap = es / (float(load) * float(cpus))
    # det:1e308 at load 0.5 gave exp:inf; det:1e-320 a rate of inf (said as load = inf).
    if not (math.isfinite(mean_gap) and mean_gap > 0 and math.isfinite(1 / mean_gap)):
        raise spec_error("size", size, f"a mean size whose arrivals at load {load:g} have a "
                         f"finite rate (mean size {es:g} ms gives a mean gap of "
                         f"{mean_gap:g} ms)")
    return f"exp:{mean_gap!r}"


def _poisson_rate(arrival: str) -> tuple[float, bool]:
    """(rate, is Poisson) of an arrival text; exp, erlang:1 and hyperexp with CV 1 are Poisson."""
    info = _core.parse_dist(arrival, "arrival")
    mean = float(info["mean"])
    p = info["params"]
    poisson = (info["name"] == "exp" or (info["name"] == "erlang" and p[0] == 1)
               or (info["name"] == "hyperexp" and p[1] == 1))
    return (1 / mean if mean > 0 else math.inf), poisson


def _poisson_model(arrival: str, size: str, cpus: int) -> tuple[float, _Size] | None:
    """(arrival rate, size) of a stable model on `cpus` CPUs, or None when the arrivals are not
    Poisson (no closed form); raises on bad text, on cpus < 1 and on a load >= 1."""
    lam, poisson = _poisson_rate(arrival)
    s = _Size.parse(size)
    if cpus < 1:
        raise spec_error("cpus", cpus, "a whole number >= 1")
    _check_stable(lam * s.mean / cpus)
    return (lam, s) if poisson else None


def _check_stable(rho: float) -> None:
    if not rho < 1:
        raise spec_error("load", f"{rho:.6g}", "a load < 1 (at 1 or more the queue is unstable "
                         "and has no steady state)")


class _MG1:
    """Conditional response times E[T(x)] (vectorised in x) of one M/G/1 queue."""

    def __init__(self, lam: float, size: _Size) -> None:
        self.lam, self.s = lam, size
        self.rho = lam * size.mean
        _check_stable(self.rho)
        self.wait_fcfs = lam * size.second / (2 * (1 - self.rho))

    def _rho(self, x: np.ndarray, strict: bool = False) -> np.ndarray:
        return self.lam * self.s.m(1, x, strict)

    def fcfs(self, x: np.ndarray) -> np.ndarray:
        return x + self.wait_fcfs

    def ps(self, x: np.ndarray) -> np.ndarray:
        return x / (1 - self.rho)

    def sjf(self, x: np.ndarray) -> np.ndarray:
        # Cobham with one class per size: wait for all residual work, then for earlier jobs of
        # size <= x (rho(x)), and for later arrivals strictly smaller (rho(x-)).
        return x + (self.lam * self.s.second / 2
                    / ((1 - self._rho(x, True)) * (1 - self._rho(x))))

    def psjf(self, x: np.ndarray) -> np.ndarray:
        left, right = 1 - self._rho(x, True), 1 - self._rho(x)
        return x / left + self.lam * self.s.m(2, x) / (2 * left * right)

    def srpt_wait(self, x: np.ndarray) -> np.ndarray:
        work = self.s.m(2, x) + x * x * self.s.sf(x)  # E[min(S,x)^2]: jobs above x count as x
        return self.lam * work / (2 * (1 - self._rho(x, True)) * (1 - self._rho(x)))

    def srpt_residence(self, x: float) -> float:
        return self.s.integrate_dt(lambda t: 1 / (1 - self._rho(t)), x)

    def srpt(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        res = np.vectorize(self.srpt_residence)(x)
        return self.srpt_wait(x) + res

    def fb(self, x: np.ndarray) -> np.ndarray:
        tail = self.s.sf(x)
        rx = self.lam * (self.s.m(1, x) + x * tail)  # load of sizes truncated at x
        e2 = self.s.m(2, x) + x * x * tail
        return (x * (1 - rx) + self.lam * e2 / 2) / (1 - rx) ** 2

    def mean(self, policy: str) -> float:
        if policy == "fcfs":
            return self.s.mean + self.wait_fcfs
        if policy == "ps":
            return self.s.mean / (1 - self.rho)
        if policy == "srpt":
            # E[integral_0^S dt/(1-rho(t))] = integral_0^inf P(S>t)/(1-rho(t)) dt (Fubini).
            return (self.s.expect(self.srpt_wait)
                    + self.s.integrate_dt(lambda t: self.s.sf(t) / (1 - self._rho(t))))
        return self.s.expect(getattr(self, policy))


def _checked(policy: Any, arrival: Any, size: Any, cpus: Any, params: dict[str, Any],
             first: str = "arrival") -> tuple[str, str, str, int]:
    """A question to the closed forms checked as `schedlab theory` checks it: a known policy
    (by name or alias) with only its own parameters, a quantum > 0, distributions as text (a
    bare number is a constant, as everywhere) and a whole number of CPUs. Returns the
    policy's name, the two distributions (the first is `first`: arrival, or a closed
    system's think) and the CPUs; raises SpecError naming the key."""
    if not isinstance(policy, str):
        raise spec_error("policy", policy, "a policy's name (schedlab policies)")
    info = find_policy(_canonical(policy))
    own = {q["name"] for q in info["params"]}
    for name, value in params.items():
        if name not in own:
            raise spec_error(name, value, f"no {name}: {info['name']} has none")
    quantum = params.get("quantum")
    if quantum is not None and not (isinstance(quantum, numbers.Real)
                                    and not isinstance(quantum, bool) and quantum > 0):
        raise spec_error("quantum", quantum, "a number > 0 (ms)")
    if "preemptive" in params:
        # "maybe" read as true before, where the command line refuses it.
        try:
            flag = param_value("preemptive", params["preemptive"], text=True)
        except SpecError:
            flag = None
        if not isinstance(flag, bool):
            raise spec_error("preemptive", quoted(params["preemptive"]), "true or false")
    # Every other value by the simulator's rule for it (levels = 0 was "no closed form").
    others = {k: v for k, v in params.items() if k not in ("quantum", "preemptive")}
    if others:
        _core.validate({"policy": info["name"], "load": 0.5, "jobs": 1, "params": others})
    dists = []
    for key, value in ((first, arrival), ("size", size)):
        value = as_dist(value)
        if not isinstance(value, str):
            raise spec_error(key, value, f"a distribution ({_core.DIST_SYNTAX})")
        dists.append(value)
    # As many as the simulator takes: the Erlang sums run over the CPUs (1e9 ran for minutes).
    return info["name"], dists[0], dists[1], whole_number("cpus", cpus, 1, _core.MAX_CPUS)


def _single_cpu_policy(policy: str, params: dict[str, Any], size: _Size) -> str | None:
    """The M/G/1 formula a policy with these parameters follows, or None."""
    if policy == "lcfs":
        return "ps" if _truthy(params.get("preemptive", True)) else "fcfs"
    if policy == "rr":
        quantum = params.get("quantum")
        if quantum is None:
            return "ps"
        # A quantum no job outgrows: every job ends in its first turn, in arrival order.
        # Shorter: no closed form.
        return "fcfs" if size.largest <= float(quantum) else None
    if policy == "fb" and params.get("quantum") is not None:
        return None  # the formula is the fluid limit; a quantised FB has none
    return policy if policy in ("fcfs", "ps", "srpt", "psjf", "sjf", "fb") else None


def mean_response(policy: str, arrival: str, size: str, cpus: int = 1,
                  **params: Any) -> float | None:
    """Mean response time E[T] of an M/G/1 (or M/M/k) queue, or None without a closed form.

    `arrival` must be Poisson (`exp:MEAN`); `params` are the policy's (`preemptive` of lcfs,
    `quantum` of rr and fb). RR without a quantum means the limit quantum -> 0, which is PS (the
    simulator's rr defaults to a quantum of 10: pass it, and the answer is None, unless no job
    is larger than the quantum: then every job ends in its first turn, as in FCFS). Raises
    ValueError when the load is >= 1, SpecError on bad input.
    """
    name, arrival, size, cpus = _checked(policy, arrival, size, cpus, params)
    model = _poisson_model(arrival, size, cpus)
    if model is None:
        return None
    lam, s = model
    formula = _single_cpu_policy(name, params, s)
    if formula is None:
        return None
    if cpus > 1:
        # M/M/k FCFS by Erlang C; PS (or RR without a quantum), n jobs at min(1, k/n) each, is
        # a symmetric queue: its number in system is M/M/k's birth-death chain whatever the
        # sizes (insensitivity), so is its mean.
        if name in ("ps", "rr") and formula == "ps" or name == "fcfs" and s.exponential:
            return mmk_mean_response(lam, 1 / s.mean, cpus)
        return None
    return float(_MG1(lam, s).mean(formula))


def conditional_response(policy: str, arrival: str, size: str, x: float | np.ndarray,
                         **params: Any) -> float | np.ndarray | None:
    """Mean response time E[T(x)] of a job of size x in an M/G/1 queue, or None.

    `x` may be an array (for small-versus-large plots); the answer then has its shape.
    """
    policy, arrival, size, _cpus = _checked(policy, arrival, size, 1, params)
    lam, poisson = _poisson_rate(arrival)
    s = _Size.parse(size)
    _check_stable(lam * s.mean)
    xs = np.asarray(x, dtype=float)
    if np.any(~(xs >= 0)):
        raise ValueError(f"conditional_response: job size x = {x}: expected x >= 0")
    if not poisson:
        return None
    formula = _single_cpu_policy(_canonical(policy), params, s)
    if formula is None:
        return None
    out = np.asarray(getattr(_MG1(lam, s), formula)(xs), dtype=float)
    return float(out) if out.ndim == 0 else out


def mm1_quantile(p: float, lam: float, mu: float) -> float:
    """p-quantile of the M/M/1 FCFS response time, which is exponential with rate mu - lam."""
    if not 0 <= p < 1:
        raise ValueError(f"quantile p = {p}: expected 0 <= p < 1")
    if not mu > 0:
        raise ValueError(f"service rate mu = {mu}: expected a number > 0")
    _check_stable(lam / mu)
    return -math.log1p(-p) / (mu - lam)


def erlang_c(k: int, offered: float) -> float:
    """Probability that an arrival waits in M/M/k, offered load a = lambda/mu < k.

    Erlang B by its recursion stays in [0, 1], so this is stable for k in the thousands where
    a^k/k! would overflow.
    """
    if k < 1 or offered < 0:
        raise ValueError(f"erlang_c: expected k >= 1 and offered >= 0, got {k}, {offered}")
    _check_stable(offered / k)
    b = 1.0
    for n in range(1, k + 1):
        b = offered * b / (n + offered * b)
    return k * b / (k - offered * (1 - b))


def mmk_mean_response(lam: float, mu: float, k: int) -> float:
    """Mean response time of M/M/k FCFS: C(k, a) / (k mu - lam) + 1/mu."""
    return erlang_c(k, lam / mu) / (k * mu - lam) + 1 / mu


# ---------------------------------------------------------------------------------------------
# Response-time distributions
# ---------------------------------------------------------------------------------------------

# Laplace inversion by the Fourier-series method with Euler summation (Abate and Whitt, "The
# Fourier-series method for inverting transforms of probability distributions", Queueing
# Systems 10, 1992): discretisation error e^{-A} ~ 1.4e-11 for a function bounded by 1, the first
# _EULER_N terms summed, then the binomial (Euler) mean of the next _EULER_TAIL partial sums.
_EULER_A = 25.0
_EULER_N = 60
_EULER_TAIL = 20
_BENES_GUARD = 1e7  # largest cancellation factor 2^n (x/E[S])^n / n! a Benes term may have
_ATOM_SUMS = 20_000  # largest support of a sum of point-mass sizes enumerated exactly
_ATOM_TERMS = 12  # Benes terms computed exactly with point-mass sizes (at most)
_LATTICE_END = 6.5  # M/D/1-PS: the expansion in e^{-sD} up to this many sizes D, then one
# inversion (the two agree to ~1e-10 from 4 D to 10 D at loads 0.5 to 0.95)


@cache
def _euler_nodes() -> tuple[np.ndarray, np.ndarray]:
    """Nodes beta_k and weights eta_k: f(t) ~ (1/t) sum_k eta_k Re F(beta_k / t), F the Laplace
    transform of f, beta_k = (A + 2 pi i k) / 2."""
    n, m, a = _EULER_N, _EULER_TAIL, _EULER_A
    k = np.arange(n + m + 1)
    binom = np.array([math.comb(m, j) for j in range(m + 1)]) / 2.0**m
    # Term k enters the partial sums s_{n+j} with j >= k - n.
    share = np.array([binom[max(0, i - n):].sum() for i in k])
    share[0] *= 0.5
    return (a + 2j * math.pi * k) / 2, math.exp(a / 2) * (-1.0) ** k * share


def _invert(transform: Callable[[np.ndarray], np.ndarray], t: np.ndarray) -> np.ndarray:
    """f(t) for t > 0 (1-D) from its Laplace transform, which takes an array of s whose rows
    are the nodes of one t (all with Re s > 0)."""
    beta, eta = _euler_nodes()
    t = np.asarray(t, dtype=float)
    if not len(t):
        return np.zeros(0)
    return (eta * transform(beta / t[:, None]).real).sum(axis=1) / t


class _Law:
    """A response-time distribution: P(T <= x), its mean and quantiles.

    `lower` is the left end of the support (P(T < lower) = 0) and `atoms` the points where the
    cdf jumps; subclasses give `_cdf` for a 1-D array of x >= lower, x > 0.
    """

    lower = 0.0
    atoms: np.ndarray = np.empty(0)

    def __init__(self, mean: float) -> None:
        self.mean = mean

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def cdf(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        flat = x.ravel()
        out = np.zeros(flat.shape)
        inside = (flat >= self.lower) & (flat > 0) & np.isfinite(flat)
        if inside.any():
            out[inside] = self._cdf(flat[inside])
        out[np.isposinf(flat)] = 1.0
        return np.clip(out, 0.0, 1.0).reshape(x.shape)

    def quantile(self, p: float) -> float:
        """inf {x : P(T <= x) >= p}, by bracketing and Brent's method on the cdf; a jump of the
        cdf across p is returned exactly."""
        from scipy.optimize import brentq

        def f(x: float) -> float:
            return float(self.cdf(x)) - p

        lo = self.lower
        if lo > 0 and f(lo) >= 0:
            return lo
        hi = max(self.mean, lo, 1e-300)
        for _ in range(200):
            if f(hi) >= 0:
                break
            lo, hi = hi, 2 * hi
        else:  # the cdf is accurate to ~1e-10: it may never reach a p nearer 1 than that
            raise ValueError(f"quantile p = {p}: too close to 1 for the accuracy of the cdf")
        x = float(brentq(f, lo, hi, xtol=1e-13 * hi, rtol=1e-13, maxiter=500))
        near = self.atoms[np.abs(self.atoms - x) <= 1e-9 * max(x, 1e-300)]
        for a in near:
            if f(float(a)) >= 0:
                return float(a)
        return x


class _MMkFcfs(_Law):
    """M/M/k FCFS: P(W > t) = C e^{-gamma t}, gamma = k mu - lambda, and T = W + S with S
    exponential(mu) independent, so P(T > x) = e^{-mu x}
    + C mu (e^{-gamma x} - e^{-mu x}) / (mu - gamma), which is C mu x e^{-mu x} at mu = gamma."""

    def __init__(self, lam: float, mu: float, k: int) -> None:
        super().__init__(mmk_mean_response(lam, mu, k))
        self.mu, self.gamma = mu, k * mu - lam
        self.c = erlang_c(k, lam / mu)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        mu, g = self.mu, self.gamma
        d = abs(mu - g)
        # (e^{-g x} - e^{-mu x}) / (mu - g) = e^{-min x} (1 - e^{-d x}) / d, no cancellation.
        conv = x * np.exp(-mu * x) if d == 0 else np.exp(-min(mu, g) * x) * -np.expm1(-d * x) / d
        return -np.expm1(-mu * x) - self.c * mu * conv


class _FcfsMG1(_Law):
    """M/G/1 FCFS. T = S + R_1 + ... + R_N, N geometric (P(N = n) = (1 - rho) rho^n), R_i of the
    equilibrium law (density P(S > r) / E[S], transform R*(s) = (1 - S*(s)) / (s E[S])), so
    T*(s) = (1 - rho) S*(s) / (1 - rho R*(s)) (Pollaczek-Khinchine). The first terms of this
    series (Benes) carry the jumps and kinks of the cdf, which slow any Laplace inversion down:
    they are computed exactly,

        P(S + R_1 + ... + R_n <= x)
            = sum_j C(n, j) (-1)^j E[(x - S_1 - ... - S_{j+1})_+^n] / (n! E[S]^n),

    for n <= 11 with point-mass sizes (det, empirical: sums enumerated while their support
    stays small) and n <= 1 with sizes whose density jumps (uniform, bpareto: one quadrature);
    the rest, whose transform is (1 - rho) S* (rho R*)^{n+1} / (1 - rho R*), by the inversion.
    """

    def __init__(self, lam: float, size: _Size) -> None:
        self.lam, self.s, self.rho = lam, size, lam * size.mean
        _check_stable(self.rho)
        super().__init__(size.mean + lam * size.second / (2 * (1 - self.rho)))
        self.lower = size.lowest
        self.atoms = size.xs
        self.sums: list[tuple[np.ndarray, np.ndarray]] = []  # law of S_1 + ... + S_m, m = 1..
        if not size.parts:
            v, q = size.xs, size.ps
            self.sums.append((v, q))
            while len(self.sums) < _ATOM_TERMS:
                if len(v) * len(size.xs) > _ATOM_SUMS:
                    break
                v, inv = np.unique(np.add.outer(v, size.xs).ravel(), return_inverse=True)
                q = np.bincount(inv.ravel(), np.outer(q, size.ps).ravel())
                self.sums.append((v, q))
            self.nmax = len(self.sums) - 1
        elif any(isinstance(part, _Uniform | _BPareto) for _, part in size.parts):
            self.nmax = 1
        else:
            self.nmax = 0
        # Where the density of S jumps: ends of the continuous parts.
        self.edges = sorted({e for _, part in size.parts for e in (part.lo, part.hi)
                             if math.isfinite(e)})

    def _plus(self, j: int, n: int, x: np.ndarray) -> np.ndarray:
        """E[(x - S_1 - ... - S_j)_+^n] (for n = 0: P(S_1 + ... + S_j <= x))."""
        if self.sums:
            v, q = self.sums[j - 1]
            d = np.subtract.outer(x, v)
            return ((d >= 0) if n == 0 else np.maximum(d, 0) ** n) @ q
        if j == 1:
            return self.s.cdf(x) if n == 0 else x * self.s.cdf(x) - self.s.m(1, x)
        # j = 2, n = 1: E[h(x - S)] with h(z) = E[(z - S')_+], C^1 with kinks of h' at the
        # edges: quadrature over the pieces of S split where x - S crosses an edge.
        out = np.zeros(len(x))
        for i, xi in enumerate(x):
            for (w, part), ends in zip(self.s.parts, self.s._breaks, strict=True):
                top = xi - self.lower
                cuts = [xi - e for e in self.edges]
                e = np.unique(np.concatenate([ends[ends < top], [min(top, ends[-1])],
                                              [c for c in cuts if ends[0] < c < top]]))
                if len(e) < 2:
                    continue
                y, wt = _Size._nodes(e, 20)
                z = xi - y
                out[i] += w * float(np.sum(wt * part.pdf(y) * (z * self.s.cdf(z)
                                                              - self.s.m(1, z))))
        return out

    def _term(self, n: int, x: np.ndarray) -> np.ndarray:
        """P(S + R_1 + ... + R_n <= x)."""
        if n == 0:
            return self._plus(1, 0, x)
        total = sum((-1) ** j * math.comb(n, j) * self._plus(j + 1, n, x) for j in range(n + 1))
        return total / (math.factorial(n) * self.s.mean**n)

    def _remainder(self, n0: int) -> Callable[[np.ndarray], np.ndarray]:
        rho, mean = self.rho, self.s.mean

        def transform(s: np.ndarray) -> np.ndarray:
            v, c = self.s.lst(s)
            r = rho * c / (s * mean)
            return (1 - rho) * v * r ** (n0 + 1) / (s * (1 - r))
        return transform

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        # Benes terms while their alternating sum keeps its digits (2^n (x/E[S])^n / n! is
        # about how many times larger than the result its terms are).
        out = np.zeros(len(x))
        ratio = 2 * x / self.s.mean
        n0 = np.zeros(len(x), dtype=int)
        for n in range(1, self.nmax + 1):
            n0[ratio**n / math.factorial(n) <= _BENES_GUARD] = n
        for n in np.unique(n0):
            sel = n0 == n
            xs = x[sel]
            exact = sum((1 - self.rho) * self.rho**k * self._term(k, xs) for k in range(n + 1))
            out[sel] = exact + _invert(self._remainder(int(n)), xs)
        return out


class _PsMM1(_Law):
    """M/M/1 PS. A job of size x (mean size 1, lambda = rho) has the sojourn-time transform
    (Coffman, Muntz and Trotter 1970)

        E[e^{-s T(x)}] = (1 - rho)(1 - rho r^2) e^{-(rho (1 - r) + s) x}
                         / ((1 - rho r)^2 - rho (1 - r)^2 e^{-(1 - rho r^2) x / r}),

    r the root of rho r^2 - (1 + rho + s) r + 1 = 0 inside the unit disc. Over exponential
    sizes, expanding the denominator as a geometric series,

        T*(s) = (1 - rho)(1 - rho r^2) / c * sum_n q^n / (a + n b),

    a = 1 + rho (1 - r) + s, b = (1 - rho r^2) / r, c = (1 - rho r)^2, q = rho (1 - r)^2 / c
    (|q| < 1). Time is in units of the mean size.
    """

    def __init__(self, lam: float, mean: float) -> None:
        self.rho, self.scale = lam * mean, mean
        _check_stable(self.rho)
        super().__init__(mean / (1 - self.rho))

    def transform(self, s: np.ndarray) -> np.ndarray:
        """T*(s) with mean size 1."""
        rho = self.rho
        b0 = 1 + rho + s
        d = np.sqrt(b0 * b0 - 4 * rho)
        d = np.where(np.abs(b0 + d) >= np.abs(b0 - d), d, -d)
        r = 2 / (b0 + d)  # the small root, without cancellation
        a = 1 + rho * (1 - r) + s
        b = (1 - rho * r * r) / r
        c = (1 - rho * r) ** 2
        q = rho * (1 - r) ** 2 / c
        qmax = float(np.abs(q).max())
        terms = 1 + int(math.log(1e-18) / math.log(qmax)) if qmax > 0 else 1
        a, b, q = a.ravel(), b.ravel(), q.ravel()
        out = np.zeros(a.shape, complex)
        steps = np.arange(256)
        for lo in range(0, a.size, 4096):  # sum_n q^n / (a + n b), in blocks of s and of n
            sl = slice(lo, lo + 4096)
            qs = q[sl, None]
            qpow = np.cumprod(np.concatenate([np.ones_like(qs), np.repeat(qs, 255, axis=1)],
                                             axis=1), axis=1)  # q^0 .. q^255
            power = np.ones_like(qs)
            for first in range(0, terms, 256):
                n = first + steps
                out[sl] += (power * qpow / (a[sl, None] + n * b[sl, None])).sum(axis=-1)
                power = power * qpow[:, -1:] * qs
        return (1 - rho) * (1 - rho * r * r) / c * out.reshape(s.shape)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return _invert(lambda s: self.transform(s) / s, x / self.scale)


class _PsMD1(_Law):
    """M/D/1 PS (every job of size D), derived here from the branching structure of PS (the
    method of Yashkov 1983 and Ott 1984). Follow the tagged job's remaining work v, from D
    down to 0. Every job present is served at the tagged job's pace, so another job present
    at level v stays until level v - (its remaining work); each job present brings arrivals at
    rate lambda per unit of level. A job arriving at level v <= D stays for the rest of the
    tagged sojourn, and with its descendants adds work B(v) to it, of transform
    beta(s, v) = e^{-J(v)}, J' = s + lambda (1 - e^{-J}), J(0) = 0, that is

        beta(s, v) = (s + lambda) / (lambda + s e^{(s + lambda) v}).

    The tagged job contributes beta(s, D). An arrival finds N others, P(N = n) = (1 - rho)
    rho^n, with residual works uniform on (0, D), each adding work of transform
    gamma(s) = (1/D) integral_0^D beta(s, D) / beta(s, u) du
             = [L D + s (e^{(s+L) D} - 1) / (s + L)] / (D (L + s e^{(s+L) D})), L = lambda.
    So T*(s) = beta(s, D) (1 - rho) / (1 - rho gamma(s)); its mean is D / (1 - rho), and T = D
    exactly (alone, and nobody comes) with probability (1 - rho) e^{-lambda D}.

    With E = e^{-lambda D} z, z = e^{-sD}, T* is a rational function of s and z. The cdf has
    kinks at every multiple of D, which slow a Laplace inversion down; up to 6.5 D it is
    computed as sum_k g_k(x - kD) over the coefficients g_k of z^k in T*(s) / s (each smooth,
    of rational transform, inverted alone; the coefficients are found by an FFT on |z| = 1);
    farther out, where the kinks are weak and that sum cancels, by one inversion of T*(s) e^{sD}.
    """

    def __init__(self, lam: float, d: float) -> None:
        self.lam, self.d, self.rho = lam, d, lam * d
        _check_stable(self.rho)
        super().__init__(d / (1 - self.rho))
        self.lower = d
        self.atoms = np.array([d])
        self.alone = (1 - self.rho) * math.exp(-lam * d)  # P(T = D)

    def shifted(self, s: np.ndarray, z: np.ndarray) -> np.ndarray:
        """T*(s) e^{sD} as a function of s and an independent z (z = e^{-sD} on the line)."""
        lam, d, rho = self.lam, self.d, self.rho
        e = math.exp(-lam * d) * z
        den = lam * e + s
        gamma = (lam * d * (s + lam) * e + s * (1 - e)) / (d * (s + lam) * den)
        return (s + lam) * math.exp(-lam * d) / den * (1 - rho) / (1 - rho * gamma)

    def _coefficients(self, s: np.ndarray, k: int) -> np.ndarray:
        """[z^j] of T*(s, z) / s for j = 0..k, shape s.shape + (k + 1,)."""
        m = 128
        z = np.exp(2j * math.pi * np.arange(m) / m)
        vals = z * self.shifted(s[..., None], z) / s[..., None]
        return (np.fft.fft(vals, axis=-1) / m)[..., :k + 1]

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        d = self.d
        out = np.zeros(len(x))
        far = x > _LATTICE_END * d
        if far.any():
            out[far] = self.alone + _invert(
                lambda s: (self.shifted(s, np.exp(-s * d)) - self.alone) / s, x[far] - d)
        for i in np.flatnonzero(~far):
            t = float(x[i])
            top = int(t / d + 1e-12)  # g_j(x - jD) for every jD <= x
            total = 0.0
            for j in range(1, top + 1):
                tau = max(t - j * d, 1e-10 * d)  # g_j is right-continuous at 0
                total += float(_invert(lambda s, j=j: self._coefficients(s, j)[..., j],
                                       np.array([tau]))[0])
            out[i] = total
        return out


def _response_law(policy: str, arrival: str, size: str, cpus: int,
                  params: dict[str, Any]) -> _Law | None:
    name, arrival, size, cpus = _checked(policy, arrival, size, cpus, params)
    model = _poisson_model(arrival, size, cpus)
    if model is None:
        return None
    lam, s = model
    if name == "lcfs":
        return None  # same means as PS or FCFS, other distributions (busy periods)
    formula = _single_cpu_policy(name, params, s)
    deterministic = not s.parts and len(s.xs) == 1
    if formula in ("srpt", "psjf", "sjf") and deterministic:
        formula = "fcfs"  # equal sizes are served in arrival order
    if cpus > 1:
        if formula == "fcfs" and s.exponential:
            return _MMkFcfs(lam, 1 / s.mean, cpus)
        return None
    if formula == "fcfs":
        return _MMkFcfs(lam, 1 / s.mean, 1) if s.exponential else _FcfsMG1(lam, s)
    if formula == "ps":
        if s.exponential:
            return _PsMM1(lam, s.mean)
        if deterministic:
            return _PsMD1(lam, float(s.xs[0]))
    return None


def response_cdf(policy: str, arrival: str, size: str, x: float | np.ndarray, cpus: int = 1,
                 **params: Any) -> float | np.ndarray | None:
    """P(T <= x), the response-time distribution, or None where no theory applies.

    Covered: FCFS in M/M/k (Erlang C) and M/G/1 for every size law (Pollaczek-Khinchine,
    inverted numerically), PS in M/M/1 and M/D/1 (RR without a quantum is PS); SRPT, PSJF and
    SJF with deterministic sizes, which serve in arrival order. `x` may be an array (the answer
    then has its shape); x < 0 gives 0. Raises ValueError when the load is >= 1.
    """
    try:
        xs = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise spec_error("x", quoted(x), "a number or an array of numbers (ms)") from None
    if np.any(np.isnan(xs)):
        raise spec_error("x", x, "numbers, not NaN (ms)")
    law = _response_law(policy, arrival, size, cpus, params)
    if law is None:
        return None
    out = law.cdf(xs)
    return float(out) if out.ndim == 0 else out


def response_quantile(policy: str, arrival: str, size: str, p: float | np.ndarray,
                      cpus: int = 1, **params: Any) -> float | np.ndarray | None:
    """The p-quantile inf {x : P(T <= x) >= p} of the response time, 0 < p < 1 (an array of p
    gives an array), or None where `response_cdf` has no theory."""
    try:
        ps = np.asarray(p, dtype=float)
    except (TypeError, ValueError):
        ps = np.array(np.nan)
    if np.any(~((ps > 0) & (ps < 1))):
        raise spec_error("p", quoted(p), "a probability strictly between 0 and 1 (or an "
                         "array of them)")
    law = _response_law(policy, arrival, size, cpus, params)
    if law is None:
        return None
    out = np.array([law.quantile(float(q)) for q in ps.ravel()]).reshape(ps.shape)
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------------------------
# Priority classes (Cobham)
# ---------------------------------------------------------------------------------------------


def priority_classes(classes: Sequence[dict[str, Any]], preemptive: bool) -> list[float]:
    """Mean response time per class of an M/G/1 priority queue, in the input order.

    Each class has `rate` (its Poisson arrival rate), `size` (distribution text) and optionally
    `priority` (lower runs first; default its index in the list). Classes of equal priority are
    merged into one FCFS class, as the simulator serves them: they share the waiting-time term,
    each keeps its own E[S_k].
    """
    if not classes:
        raise ValueError("priority_classes: expected at least one class")
    rows = []
    for i, c in enumerate(classes):
        missing = [key for key in ("rate", "size") if key not in c]
        if missing:
            raise spec_error(f"classes[{i}]", c, f"keys rate and size (missing {missing})")
        rate = float(c["rate"])
        if not (math.isfinite(rate) and rate >= 0):
            raise spec_error(f"classes[{i}].rate", rate, "a rate >= 0")
        s = _Size.parse(c["size"], f"classes[{i}].size")
        rows.append((c.get("priority", i), rate, s.mean, rate * s.second / 2))
    _check_stable(sum(r * m for _, r, m, _ in rows))
    levels = sorted({r[0] for r in rows})
    # Per priority level: the load and residual work of that level and all more important ones.
    before = {}  # level -> (s_{k-1}, s_k, residual work of levels <= k)
    s_prev = resid = 0.0
    for level in levels:
        s_here = s_prev + sum(r * m for p, r, m, _ in rows if p == level)
        resid += sum(w for p, _, _, w in rows if p == level)
        before[level] = (s_prev, s_here, resid)
        s_prev = s_here
    w0 = resid  # all classes
    out = []
    for level, _, mean, _ in rows:
        s_prev, s_here, resid_k = before[level]
        denom = (1 - s_prev) * (1 - s_here)
        if preemptive:
            out.append(mean / (1 - s_prev) + resid_k / denom)
        else:
            out.append(mean + w0 / denom)
    return out


# ---------------------------------------------------------------------------------------------
# Closed systems
# ---------------------------------------------------------------------------------------------


def mva(clients: int, think: float, demands: Sequence[float],
        kinds: Sequence[str] | None = None) -> dict[str, Any]:
    """Exact MVA of a closed product-form network: `clients` jobs, mean think time `think`,
    service demand D_i per visit set at each station, `kinds` 'queue' (FCFS exp or PS) or 'delay'.

    Returns response (sum of residence times, think excluded), throughput, and per station
    queue (mean number present), residence and utilization.
    """
    d = np.asarray(demands, dtype=float)
    kinds = list(kinds) if kinds is not None else ["queue"] * len(d)
    if len(kinds) != len(d) or any(k not in ("queue", "delay") for k in kinds):
        raise ValueError(f"mva: kinds must be 'queue' or 'delay', one per demand, got {kinds}")
    if clients < 0 or think < 0 or np.any(d < 0):
        raise ValueError("mva: expected clients >= 0, think >= 0 and demands >= 0")
    is_queue = np.array([k == "queue" for k in kinds])
    q = np.zeros(len(d))
    r = d.copy()
    x = 0.0
    for n in range(1, clients + 1):
        r = np.where(is_queue, d * (1 + q), d)  # an arrival sees the mean queue with n-1 jobs
        x = n / (think + r.sum())
        q = x * r
    return {"response": float(r.sum()) if clients else 0.0, "throughput": float(x),
            "queue": q.tolist(), "residence": (r if clients else np.zeros(len(d))).tolist(),
            "utilization": (x * d).tolist()}


def machine_repairman(clients: int, think: float, service: float) -> dict[str, Any]:
    """The interactive system of one server (FCFS exp or PS) and `clients` thinking clients."""
    return mva(clients, think, [service])


def closed_mean_response(policy: str, clients: Any, think: Any, size: Any, cpus: Any = 1,
                         **params: Any) -> float | None:
    """Mean response time (thinking excluded) of a closed interactive system: `clients`
    clients, each thinking (any law; `think` as a distribution) and then submitting one job of
    `size` to `cpus` CPUs, or None where the system has no product form.

    Exact where the CPUs are a product-form (BCMP) station, whose number of jobs is then a
    birth-death chain (born at (N - n) / Z, dying at min(n, k) / E[S]) whatever the think
    law: processor sharing for any sizes (and rr without a quantum, its limit), FCFS (and
    non-preemptive LCFS) for exponential sizes, preemptive LCFS for any sizes on one CPU;
    None where both the think time and the size are constant (the clients stay in step). The
    response is N / X - Z (Little's law over the whole loop). With one CPU this is
    `machine_repairman`, the exact MVA."""
    n = whole_number("clients", clients, 1, _core.MAX_CLIENTS)
    name, think, size, cpus = _checked(policy, think, size, cpus, params, first="think")
    thinking = _Size.parse(think, "think")
    z, s = thinking.mean, _Size.parse(size)
    formula = _single_cpu_policy(name, params, s)
    product_form = ((formula == "ps" and (name != "lcfs" or cpus == 1))
                    or (formula == "fcfs" and s.exponential))
    # Constant thinking (not 0) and sizes: clients that start together stay in step for ever,
    # a periodic orbit, not the stationary state the chain describes.
    if not product_form or (z > 0 and thinking.constant and s.constant):
        return None
    at_cpus = np.arange(n + 1)
    busy = np.minimum(at_cpus, cpus)
    if z == 0:  # every client is always at the CPUs
        throughput = min(n, cpus) / s.mean
    else:
        # log P(n) up to a constant: the product of birth over death rates up to n.
        steps = np.log((n - at_cpus[1:] + 1) / z) - np.log(busy[1:] / s.mean)
        logp = np.concatenate([[0.0], np.cumsum(steps)])
        p = np.exp(logp - logp.max())
        throughput = float((p * busy).sum() / p.sum() / s.mean)
    return float(n / throughput - z)


def closed_forms() -> dict[str, str]:
    """Which policies have a closed form here, and which one (a copy of COVERED)."""
    return dict(COVERED)


# ---------------------------------------------------------------------------------------------
# The closed form of a simulator spec: what sweeps, comparisons and reports draw beside runs
# ---------------------------------------------------------------------------------------------

# Keys the closed forms account for; any other key (classes, traces, closed clients, switch
# costs, per-CPU runqueues, ...) means the formula does not describe the run. A run until
# precise (precision, max_jobs) is the same queue measured for longer; what a run stores
# (keep_*, load_sample) does not change the queue.
THEORY_KEYS = {"policy", "arrival", "load", "size", "jobs", "time", "warmup", "warmup_time",
               "cpus", "seed", "batches", "allow_unstable", "keep_jobs", "keep_schedule",
               "load_sample", "precision", "max_jobs"}
# What a closed form may raise on a spec it cannot read: no theory, not a failed combine.
NO_THEORY = (ValueError, SpecError, TypeError)


@dataclass(frozen=True)
class SpecModel:
    """A sim spec as the closed forms read it: `schedlab.theory`'s arguments."""

    policy: str
    arrival: str
    size: str
    cpus: int
    params: dict[str, Any]


# A closed interactive system's keys instead of an arrival stream's.
CLOSED_THEORY_KEYS = THEORY_KEYS - {"arrival", "load"} | {"clients", "think"}


def _spec_policy(spec: dict[str, Any], keys: set[str]) -> tuple[str, dict[str, Any]] | None:
    """A sim spec's policy and its parameters, the engine's defaults included (RR's quantum
    is 10), or None when the spec has a key outside `keys` and the policy's own."""
    try:
        info = find_policy(spec["policy"])
    except (SpecError, KeyError):
        return None
    names = {p["name"] for p in info["params"]}
    given = {**(spec.get("params") or {}), **{k: v for k, v in spec.items() if k in names}}
    extra = set(spec) - keys - names - {"params"}
    if extra or spec.get("context_switch"):
        return None
    return info["name"], {**param_defaults(info["name"]), **given}


def spec_model(spec: dict[str, Any]) -> SpecModel | None:
    """The queue a sim spec describes, or None when it has a key the closed forms do not
    account for (or no arrivals to derive)."""
    policy = _spec_policy(spec, THEORY_KEYS)
    if policy is None:
        return None
    name, params = policy
    size = spec.get("size", "exp:1")
    if isinstance(size, int | float):
        size = f"det:{size}"
    cpus = int(spec.get("cpus", 1))
    arrival = spec.get("arrival")
    if arrival is None:
        if spec.get("load") is None:
            return None
        try:
            arrival = poisson_at_load(float(spec["load"]), size, cpus=cpus)
        except NO_THEORY:
            return None
    return SpecModel(name, arrival, size, cpus, params)


def _closed_form(spec: dict[str, Any], law: Callable[..., Any], *args: Any) -> Any:
    """`law(policy, arrival, size, *args, cpus=..., **params)` of `schedlab.theory` for the
    queue a sim spec describes, or None where the spec or the law has no theory."""
    if not isinstance(spec, dict):
        raise spec_error("spec", quoted(spec), "a table of a run's keys (policy, arrival or "
                         "load, size, cpus...)")
    m = spec_model(spec)
    try:
        return None if m is None else law(m.policy, m.arrival, m.size, *args, cpus=m.cpus,
                                          **m.params)
    except SpecError as e:
        if e.key in ("p", "x"):  # the question's own argument, not the spec: say so
            raise
        return None
    except NO_THEORY:
        return None


def spec_mean(spec: dict[str, Any]) -> float | None:
    """The closed-form mean response time of a sim spec, or None: an open queue's, or a
    closed interactive system's (`clients`, `think`: `closed_mean_response`)."""
    if isinstance(spec, dict) and "clients" in spec:
        return _closed_system_mean(spec)
    return _closed_form(spec, mean_response)


def _closed_system_mean(spec: dict[str, Any]) -> float | None:
    """`closed_mean_response` of a sim spec with clients, or None. A run of no more jobs than
    clients (a batch of one-shot processes) is a transient, not the steady state it gives."""
    policy = _spec_policy(spec, CLOSED_THEORY_KEYS)
    jobs = spec.get("jobs")
    if policy is None or (isinstance(jobs, numbers.Real) and jobs <= spec["clients"]):
        return None
    size = spec.get("size", "exp:1")
    try:
        return closed_mean_response(policy[0], spec["clients"], spec.get("think", "det:0"),
                                    f"det:{size}" if isinstance(size, int | float) else size,
                                    spec.get("cpus", 1), **policy[1])
    except NO_THEORY:
        return None


def spec_quantile(spec: dict[str, Any], p: float | Any) -> float | np.ndarray | None:
    """Quantiles of the response time of a sim spec (`response_quantile`; `p` a number
    or a list), or None where the distribution has no theory."""
    return _closed_form(spec, response_quantile, p)


def spec_cdf(spec: dict[str, Any], x: float | Any) -> float | np.ndarray | None:
    """P(T <= x) of a sim spec (`response_cdf`), or None where there is no theory."""
    return _closed_form(spec, response_cdf, x)


RR_LIMIT = ("rr without a quantum is its limit as the quantum vanishes: processor sharing "
            "(the simulator's rr has quantum 10 ms; a finite quantum has no closed form)")
RR_AS_FCFS = ("no job is larger than the quantum: each ends in its first turn, in arrival "
              "order, so rr is fcfs")
QUANTILE_ALLOWED = "a probability strictly between 0 and 1, e.g. 0.99"
# What `answer` says beside the policy's parameters.
ANSWER_KEYS = ("policy", "arrival", "clients", "think", "size", "cpus", "unit", "mean", "note",
               "quantiles")


def answer(policy: Any = "fcfs", size: str = "exp:1", *, arrival: str | None = None,
           load: float | None = None, cpus: int = 1, quantiles: Any = (),
           clients: int | None = None, think: Any = None, **params: Any) -> dict[str, Any]:
    """`schedlab theory` from Python (as `schedlab.theory(...)`): the closed-form mean
    response time and the quantiles asked for, in ms, as `schedlab theory --json` prints them:
    `mean` (None where there is no closed form), `quantiles` (`{"p99": ...}`, each None where
    the response time has no known law), the arrival law (`load` gives Poisson arrivals at
    that utilisation), the policy's parameters, and a `note` where the answer is a limit.
    `policy` is a name, `"rr:quantum=5"` or a `schedlab.policies` object, as `simulate` takes;
    `quantiles` one probability or several (a list, a tuple, an array). `clients` (and
    `think`, default det:0) instead of an arrival law: a closed interactive system
    (`closed_mean_response`), whose response-time distribution has no closed form here.

        schedlab.theory("srpt", "exp:1", load=0.9, quantiles=[0.99])
        schedlab.theory("ps", "det:250", clients=7, think="uniform:9,11", cpus=2)
    """
    given = Params()
    name = given.of_policy(policy)
    if not isinstance(name, str) or "," in name:
        raise spec_error("policy", quoted(name), "one policy's name (schedlab policies)")
    find_policy(name)  # an unknown name is bad input; a known one may lack a formula
    if "quantile" in params:  # the command line's --quantile, one or several
        raise spec_error("quantile", quoted(params["quantile"]), "quantiles=: in Python the "
                         "probabilities come as quantiles (one, or a list)")
    given.give({k: v for k, v in params.items() if v is not None}, "its own key")
    params = dict(sorted(given.values.items()))
    probabilities = _probabilities(quantiles)
    if clients is not None or think is not None:
        return _closed_answer(name, size, cpus, clients, think, arrival, load, probabilities,
                              params)
    if load is not None and arrival is not None:
        raise spec_error("load", quoted(load), "either load or arrival, not both")
    size = as_dist(size)  # a bare number is a constant, as simulate takes it
    if load is not None:
        arrival = poisson_at_load(load, size, cpus=cpus)
    if arrival is None:
        raise spec_error("arrival", "(missing)", "an arrival distribution exp:MEAN, or load")
    arrival = as_dist(arrival)
    try:
        mean = mean_response(name, arrival, size, cpus=cpus, **params)
        values = None
        if probabilities and mean is not None:
            values = response_quantile(name, arrival, size, probabilities, cpus=cpus,
                                       **params)
    except SpecError as e:
        # An unstable queue from the arrival given is the arrival's fault, as the simulator
        # says it.
        if getattr(e, "key", None) == "load" and load is None:
            raise spec_error("arrival", f"{arrival} (load {e.value})", e.allowed) from None
        raise
    except OverflowError:
        raise spec_error("size", quoted(size), "a size law whose moments are finite in "
                         "double precision (the closed form's terms overflow)") from None
    except ValueError as e:
        raise spec_error("theory", f"{name} {arrival} {size}", str(e)) from None
    out: dict[str, Any] = {"policy": name, "arrival": arrival, "size": size,
                           "cpus": int(cpus), "unit": "ms", "mean": mean, **params}
    # rr without a quantum is a limit, not the simulator's default rr (quantum 10): say so.
    if find_policy(name)["name"] == "rr" and "quantum" not in params and mean is not None:
        out["note"] = RR_LIMIT
    elif find_policy(name)["name"] == "rr" and mean is not None:
        out["note"] = RR_AS_FCFS
    if probabilities:
        out["quantiles"] = {f"p{100 * q:.10g}": None if values is None else float(values[i])
                            for i, q in enumerate(probabilities)}
    return out


def _closed_answer(name: str, size: Any, cpus: Any, clients: Any, think: Any, arrival: Any,
                   load: Any, probabilities: list[float], params: dict[str, Any]
                   ) -> dict[str, Any]:
    """`answer` for a closed interactive system: clients that think, not an arrival law."""
    if clients is None:  # think alone: the simulator's message
        raise spec_error("think", quoted(think), "clients as well (think time is for closed "
                         "workloads)")
    for key, value in (("arrival", arrival), ("load", load)):
        if value is not None:
            raise spec_error(key, quoted(value), "nothing beside clients: a closed system's "
                             "clients make its arrivals (give clients and think, or an "
                             "arrival law)")
    think = as_dist("det:0" if think is None else think)
    mean = closed_mean_response(name, clients, think, size, cpus, **params)
    out: dict[str, Any] = {"policy": name, "clients": int(clients), "think": think,
                           "size": as_dist(size), "cpus": int(cpus), "unit": "ms",
                           "mean": mean, **params}
    if find_policy(name)["name"] == "rr" and "quantum" not in params and mean is not None:
        out["note"] = RR_LIMIT
    if probabilities:
        out["quantiles"] = {f"p{100 * q:.10g}": None for q in probabilities}
    return out


def _probabilities(quantiles: Any) -> list[float]:
    """`quantiles` as a list of probabilities strictly between 0 and 1: one number or any
    collection of them (numpy's included); anything else is refused naming `quantile`."""
    if quantiles is None:
        return []
    if isinstance(quantiles, numbers.Real) or isinstance(quantiles, str | bytes):
        quantiles = [quantiles]
    try:
        items = list(quantiles)
    except TypeError:
        raise spec_error("quantile", quoted(quantiles), QUANTILE_ALLOWED) from None
    for q in items:
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not 0 < q < 1:
            raise spec_error("quantile", quoted(q), QUANTILE_ALLOWED)
    return [float(q) for q in items]


# `schedlab.theory(...)`, as the command line names it; its functions stay attributes.
callable_module(__name__, answer)
