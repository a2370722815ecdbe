"""Closed forms of queueing theory, drawn beside every measurement where they apply.

Notation: Poisson arrivals at rate lambda, job size S with cdf F, partial moments
m_k(x) = integral_0^x t^k dF(t), load of jobs no larger than x rho(x) = lambda m_1(x) (rho(x-)
counts jobs strictly smaller than x), rho = lambda E[S]. One CPU unless stated.

Mean response time E[T], and E[T(x)] for a job of size x (Harchol-Balter, *Performance Modeling
and Design of Computer Systems*, 2013: ch. 23 for P-K, ch. 30-33 for the size-based policies):

- FCFS, M/G/1 (Pollaczek-Khinchine): E[T] = E[S] + lambda E[S^2] / (2 (1 - rho)).
  Non-preemptive LCFS has the same mean.
- PS and preemptive-resume LCFS, M/G/1 (insensitive): E[T(x)] = x / (1 - rho).
  RR without a quantum is PS.
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

Size distributions come from `schedlab._core.parse_dist`, with the simulator's definitions. The
integrals over F use closed-form partial moments and Gauss-Legendre rules on quantile- and
log-spaced pieces (accurate to ~1e-9 relative); point masses (det, empirical) are exact sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np
from scipy import special

import schedlab._core as _core
from schedlab.vocabulary import spec_error

__all__ = [
    "COVERED",
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
]

# Which closed forms exist, by canonical policy name; used by the docs. Any other combination
# (other policies, non-Poisson arrivals, cpus > 1 beyond these) has none: the functions return None.
COVERED: dict[str, str] = {
    "fcfs": "M/G/1 (Pollaczek-Khinchine); M/M/k (Erlang C)",
    "lcfs": "M/G/1 preemptive-resume: E[S]/(1-rho); non-preemptive: as FCFS",
    "ps": "M/G/1: E[S]/(1-rho); M/M/k-PS: as M/M/k FCFS",
    "rr": "without a quantum only: as PS",
    "srpt": "M/G/1 (Schrage-Miller)",
    "psjf": "M/G/1 (Harchol-Balter ch. 32)",
    "sjf": "M/G/1 non-preemptive (Cobham with classes by size)",
    "fb": "M/G/1, fluid (no quantum) (Harchol-Balter ch. 33)",
    "priority": "M/G/1 by class, preemptive or not (Cobham): priority_classes()",
    "closed": "product-form closed networks by exact MVA: mva(), machine_repairman()",
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


# ---------------------------------------------------------------------------------------------
# M/G/1 and M/M/k
# ---------------------------------------------------------------------------------------------


def poisson_at_load(load: float, size: str, cpus: int = 1) -> str:
    """The Poisson arrival text `exp:MEAN` giving utilisation `load` per CPU."""
    if not (math.isfinite(load) and load > 0):
        raise spec_error("load", load, "a utilisation > 0")
    if cpus < 1:
        raise spec_error("cpus", cpus, "a whole number >= 1")
    es = float(_core.parse_dist(size, "size")["mean"])
    if es <= 0:
        raise spec_error("size", size, "a mean size > 0 to derive arrivals from a load")
    return f"exp:{es / (load * cpus)!r}"


def _poisson_rate(arrival: str) -> tuple[float, bool]:
    """(rate, is Poisson) of an arrival text; exp, erlang:1 and hyperexp with CV 1 are Poisson."""
    info = _core.parse_dist(arrival, "arrival")
    mean = float(info["mean"])
    p = info["params"]
    poisson = (info["name"] == "exp" or (info["name"] == "erlang" and p[0] == 1)
               or (info["name"] == "hyperexp" and p[1] == 1))
    return (1 / mean if mean > 0 else math.inf), poisson


def _check_stable(rho: float) -> None:
    if not rho < 1:
        raise ValueError(f"unstable: load {rho:.6g} >= 1")


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


def _single_cpu_policy(policy: str, params: dict[str, Any]) -> str | None:
    """The M/G/1 formula a policy with these parameters follows, or None."""
    if policy == "lcfs":
        return "ps" if _truthy(params.get("preemptive", True)) else "fcfs"
    if policy == "rr":
        return "ps" if params.get("quantum") is None else None  # a finite quantum: no closed form
    if policy == "fb" and params.get("quantum") is not None:
        return None  # the formula is the fluid limit; a quantised FB has none
    return policy if policy in ("fcfs", "ps", "srpt", "psjf", "sjf", "fb") else None


def mean_response(policy: str, arrival: str, size: str, cpus: int = 1,
                  **params: Any) -> float | None:
    """Mean response time E[T] of an M/G/1 (or M/M/k) queue, or None without a closed form.

    `arrival` must be Poisson (`exp:MEAN`); `params` are the policy's (`preemptive` of lcfs,
    `quantum` of rr and fb). RR without a quantum means the limit quantum -> 0, which is PS (the
    simulator's rr defaults to a quantum of 10: pass it, and the answer is None). Raises
    ValueError when the load is >= 1, SpecError on bad text.
    """
    lam, poisson = _poisson_rate(arrival)
    s = _Size.parse(size)
    if cpus < 1:
        raise spec_error("cpus", cpus, "a whole number >= 1")
    _check_stable(lam * s.mean / cpus)
    if not poisson:
        return None
    name = _canonical(policy)
    formula = _single_cpu_policy(name, params)
    if formula is None:
        return None
    if cpus > 1:
        # Only M/M/k: FCFS by Erlang C, and PS (or RR without a quantum), whose number in system
        # is the same birth-death chain.
        if name in ("fcfs", "ps", "rr") and s.exponential:
            return mmk_mean_response(lam, 1 / s.mean, cpus)
        return None
    return float(_MG1(lam, s).mean(formula))


def conditional_response(policy: str, arrival: str, size: str, x: float | np.ndarray,
                         **params: Any) -> float | np.ndarray | None:
    """Mean response time E[T(x)] of a job of size x in an M/G/1 queue, or None.

    `x` may be an array (for small-versus-large plots); the answer then has its shape.
    """
    lam, poisson = _poisson_rate(arrival)
    s = _Size.parse(size)
    _check_stable(lam * s.mean)
    xs = np.asarray(x, dtype=float)
    if np.any(~(xs >= 0)):
        raise ValueError(f"conditional_response: job size x = {x}: expected x >= 0")
    if not poisson:
        return None
    formula = _single_cpu_policy(_canonical(policy), params)
    if formula is None:
        return None
    out = np.asarray(getattr(_MG1(lam, s), formula)(xs), dtype=float)
    return float(out) if out.ndim == 0 else out


def mm1_quantile(p: float, lam: float, mu: float) -> float:
    """p-quantile of the M/M/1 FCFS response time, which is exponential with rate mu - lam."""
    if not 0 <= p < 1:
        raise ValueError(f"quantile p = {p}: expected 0 <= p < 1")
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


def closed_forms() -> dict[str, str]:
    """Which policies have a closed form here, and which one (a copy of COVERED)."""
    return dict(COVERED)
