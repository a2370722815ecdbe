"""Policies compared on one workload, the first thing anyone does with a simulator:
`schedlab sim --policy fcfs,srpt,ps,rr:quantum=5` and `simulate(policy=["fcfs", "srpt"])`.

Every policy sees the same arrivals and sizes (the same seeds: common random numbers) and is
measured on the same jobs (with `warmup = "auto"`, every policy of one replication leaves out
the largest truncation any of them finds, as in an experiment file), so the differences in
the table are the policies', not noise. Each row carries its 95% interval
(batch means within one run, or Student t across `replications`) and the closed form where
`schedlab.theory` has one for the queue the spec describes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedlab import theory
from schedlab.command import callable_module
from schedlab.policies import Policy, label, parse
from schedlab.results import Replications, Result
from schedlab.vocabulary import (
    DEFAULT_SEED,
    SUMMARY_UNITS,
    Params,
    find_policy,
    flat_spec,
    param_defaults,
    spec_error,
)
from schedlab.worlds import sim

# The metrics of the comparison table: (summary key, label); each has a `KEY_ci`. Units are
# the core's (`SUMMARY_UNITS`).
METRICS = [("response_mean", "response mean"), ("response_p99", "response p99"),
           ("wait_mean", "wait mean"), ("slowdown_mean", "slowdown mean")]
# Shown without an interval (a run gives none for it).
PLAIN = [("utilization", "utilization")]
# The closed forms drawn beside the measurement: summary key -> quantile (None: the mean).
THEORY = {"response_mean": None, "response_p99": 0.99}


def policies_of(policy: Any) -> list[tuple[str, dict[str, Any]]]:
    """(canonical name, parameters) of each policy in a list: names, `name:param=value` texts,
    comma-separated texts, `schedlab.policies` objects or tables {name, param = value}."""
    items = policy if isinstance(policy, list | tuple) else [policy]
    out: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if isinstance(item, Policy):
            out.append((item.name, dict(item.params)))
        elif isinstance(item, dict):
            rest = {k: v for k, v in item.items() if k != "name"}
            if "name" not in item:
                raise spec_error("policy", item, "a table with a name")
            out.append((find_policy(item["name"])["name"], rest))
        elif isinstance(item, str):
            out.extend(parse(item))
        else:
            raise spec_error("policy", item, "a policy name, a schedlab.policies object or "
                             "a table {name, parameters}")
    if not out:
        raise spec_error("policy", policy, "at least one policy")
    return out


@dataclass
class Comparison:
    """Policies run on the same workload and seeds: `labels` (`RR quantum=5`), each one's
    `results` (a Result, or Replications with `replications > 1`) and `specs` (flat specs),
    and `table()`: one row per policy with intervals and theory."""

    labels: list[str]
    results: list[Result | Replications]
    specs: list[dict[str, Any]]
    replications: int
    seed: int

    def runs_table(self, name: str) -> Any:
        """One of the runs' tables (`jobs`, `schedule`, ...) of every policy, one after the
        other, with a `policy` column (its label) and, with replications, a `replication`
        one: what `--jobs-out` and `jobs_out=` write."""
        import pandas as pd

        return pd.concat([r.table(name).assign(policy=label)
                          for label, r in zip(self.labels, self.results, strict=True)],
                         ignore_index=True)

    def result(self, policy_label: str) -> Result | Replications:
        return self.results[self.labels.index(policy_label)]

    def theory(self, policy_label: str) -> dict[str, float | None]:
        """The closed form of each compared metric for this policy's spec (None: none)."""
        spec = self.specs[self.labels.index(policy_label)]
        out: dict[str, float | None] = {}
        for key, q in THEORY.items():
            value = theory.spec_mean(spec) if q is None else theory.spec_quantile(spec, q)
            out[key] = None if value is None else float(value)
        return out

    def warmup_text(self) -> str:
        """The jobs every policy left out at the start, in words."""
        runs = [r.runs if isinstance(r, Replications) else [r] for r in self.results]
        cuts = sorted({int(run.summary["warmup_jobs"]) for run in runs[0]})
        jobs = f"{cuts[0]:,} jobs" if len(cuts) == 1 else \
            f"{cuts[0]:,} to {cuts[-1]:,} jobs, by replication,"
        return f"the first {jobs} left out of every policy's measure"

    @property
    def interval_method(self) -> str:
        if self.replications > 1:
            return f"Student t across {self.replications} replications"
        return "batch means within the run"

    def rows(self) -> list[dict[str, Any]]:
        """One dict per policy: the metrics, `KEY_ci_low`/`KEY_ci_high` (the bounds of their
        95% intervals: a summary's `KEY_ci` in two columns), `theory_KEY` (None without a
        closed form), the jobs measured and those left out at the start (`warmup_jobs`: the
        same for every policy), and `ci_uncorrelated` (false: one run too short to find
        uncorrelated batches, whose intervals are not to be trusted)."""
        out = []
        for name, result in zip(self.labels, self.results, strict=True):
            s = result.summary
            row: dict[str, Any] = {"policy": name}
            for key, _ in METRICS:
                ci = s.get(f"{key}_ci") or [float("nan"), float("nan")]
                row.update({key: s[key], f"{key}_ci_low": ci[0], f"{key}_ci_high": ci[1]})
            for key, _ in PLAIN:
                row[key] = s[key]
            row.update({f"theory_{k}": v for k, v in self.theory(name).items()})
            row["jobs"], row["warmup_jobs"] = s["jobs"], s["warmup_jobs"]
            # One run's intervals are to be trusted only if its batches were shown
            # uncorrelated; replications are independent.
            row["ci_uncorrelated"] = bool(s.get("ci_uncorrelated", True))
            out.append(row)
        return out

    def table(self) -> Any:
        """The comparison as a DataFrame (units in `.attrs["units"]`)."""
        import pandas as pd

        df = pd.DataFrame(self.rows())
        df.attrs["units"] = self.units()
        return df

    def units(self) -> dict[str, str]:
        units = {}
        for key, _ in METRICS:
            unit = SUMMARY_UNITS[key]
            units.update({key: unit, f"{key}_ci_low": unit, f"{key}_ci_high": unit})
        units.update({key: SUMMARY_UNITS[key] for key, _ in PLAIN})
        units.update({f"theory_{key}": SUMMARY_UNITS[key] for key in THEORY})
        units["jobs"] = units["warmup_jobs"] = SUMMARY_UNITS["jobs"]
        units["ci_uncorrelated"] = SUMMARY_UNITS["ci_uncorrelated"]
        return units

    def __repr__(self) -> str:
        return (f"Comparison({', '.join(self.labels)}; seed {self.seed}, "
                f"{self.replications} replication(s))")

    def text_table(self) -> tuple[list[str], list[list[str]]]:
        """The comparison as text, as the command prints it and a notebook shows it: a header
        (each number's unit, `[95% interval]`, theory) and one row per policy."""
        from schedlab.summary_rows import interval_of, interval_text, number_text

        units = self.units()
        header = ["policy"]
        for key, name in METRICS:
            header.append(f"{name} ({units[key]}) [95% interval]")
            if key in THEORY:
                header.append(f"theory ({units[key]})")
        header += [f"{name} ({units[key]})" for key, name in PLAIN]
        rows = []
        for row in self.rows():
            cells = [row["policy"]]
            for key, _ in METRICS:
                bounds = [row[f"{key}_ci_low"], row[f"{key}_ci_high"]]
                ci = interval_of({f"{key}_ci": bounds}, key)
                cells.append(f"{number_text(row[key])} {interval_text(ci)}".strip())
                if key in THEORY:
                    th = row[f"theory_{key}"]
                    cells.append("—" if th is None else number_text(th))
            rows.append(cells + [number_text(row[key]) for key, _ in PLAIN])
        return header, rows

    def _repr_html_(self) -> str:
        """One row per policy, as `schedlab sim --policy a,b` prints it (for notebooks)."""
        from schedlab.summary_rows import html_table

        header, rows = self.text_table()
        return html_table(header, rows, caption=f"The same workload and seed ({self.seed}) "
                          f"for every policy; 95% intervals: {self.interval_method}")

    def to_json(self) -> dict[str, Any]:
        return {"policies": self.labels, "seed": self.seed, "replications": self.replications,
                "intervals": f"95%, {self.interval_method}", "units": self.units(),
                "rows": self.rows()}


def compare(policy: Any, *, replications: int = 1, workers: int | None = None,
            **kwargs: Any) -> Comparison:
    """Runs each policy on the same workload and seeds. Keys are those of `simulate`; a policy
    parameter given as a keyword goes to every listed policy that has it (at least one must),
    and a parameter written with the policy (`rr:quantum=5`) to that one."""
    policies = policies_of(policy)
    given = Params()  # `params` and keywords: one value each (a policy's own may differ)
    given.give(dict(kwargs.pop("params", None) or {}), "params")
    given.give({k: kwargs.pop(k) for k in [k for k in kwargs
                                          if any(k in _param_names(n) for n, _ in policies)]},
               "its own key")
    shared = given.values
    for key, value in shared.items():
        takers = [(n, p) for n, p in policies if key in _param_names(n)]
        if not takers:
            names = ", ".join(n for n, _ in policies)
            raise spec_error(key, value, f"a parameter of one of the policies compared ({names})")
        if all(key in p for _, p in takers):  # each gives its own: the value would reach none
            owners = ", ".join(f"{n}:{key}={p[key]}" for n, p in takers)
            raise spec_error(key, value, f"a policy that takes it: {owners} gives its own "
                             f"(give {key} once per policy)")
    labels, specs, runs = [], [], []
    for name, params in policies:
        own = {k: v for k, v in shared.items() if k in _param_names(name)}
        params = {**own, **params}
        text = label(name, params)
        # Compared once its defaults are filled in: `rr:quantum=10` is `rr`.
        run = (name, {**param_defaults(name), **params})
        if run in runs:
            same = labels[runs.index(run)]
            also = "" if same == text else f"; {text} is {same} once its defaults are filled in"
            raise spec_error("policy", text, "each policy once (the same name and parameters "
                             f"twice compare nothing{also})")
        labels.append(text)
        runs.append(run)
        specs.append(flat_spec(name, params=params, **kwargs))
    if replications > 1:
        results: list[Result | Replications] = sim.run_replications_many(
            specs, replications, workers, common_warmup=True)
    else:
        results = list(sim.run_many(specs, workers, common_warmup=True))
    seed = int(kwargs.get("seed", DEFAULT_SEED))
    return Comparison(labels=labels, results=results, specs=specs, replications=replications,
                      seed=seed)


def _param_names(name: str) -> set[str]:
    return {q["name"] for q in find_policy(name)["params"]}


# `schedlab.compare([...], ...)` is `compare` (the docs name it beside `simulate`).
callable_module(__name__, compare)
