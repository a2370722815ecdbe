"""The `schedlab` command. Flags are a shorthand for the keys of a spec: --context-switch is
the key context_switch, and --spec FILE.toml reads the same keys from a file."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from schedlab._core import SpecError
from schedlab.spec import (
    CLASS_KEYS,
    SPEC_KEYS,
    SPEC_KINDS,
    SPEC_SECTIONS,
    add_policy_param_flags,
    load_toml,
    policy_catalog,
    spec_error,
)

SUMMARY_ROWS = [
    ("response_mean", "response mean"), ("response_p50", "response p50"),
    ("response_p95", "response p95"), ("response_p99", "response p99"),
    ("response_std", "response std"), ("wait_mean", "wait mean"),
    ("slowdown_mean", "slowdown mean"), ("throughput", "throughput"),
    ("utilization", "utilization"), ("context_switches", "context switches"),
    ("migrations", "migrations"), ("task_response_cv", "CV of task mean responses"),
    ("jain_slowdown", "Jain (slowdown)"), ("jain_share", "Jain (share/entitled)"),
]


# Tables a run can write, by the Result attribute that holds them.
TABLE_OUTPUTS = {
    "jobs": "the per-job table",
    "schedule": "every run segment (cpu, job, task, start, end)",
    "tasks": "the per-task table (response, migrations, CPU share against entitlement)",
    "loads": "the load distribution (runnable jobs per runqueue: time and completion shares)",
    "load_series": "the runnable jobs of each runqueue over time (needs --load-sample)",
}


class Parser(argparse.ArgumentParser):
    """Errors in one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


_CLASS_TEXT = ("name", "size", "think", "io", "io_kind")
_CLASS_INT = ("clients", "bursts")


def _class_arg(text: str) -> dict[str, Any]:
    """--class 'name=big fraction=0.2 size=exp:10 priority=1 affinity=0,1'"""
    out: dict[str, Any] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"class field '{part}' is not key=value")
        try:
            if key in _CLASS_TEXT:
                out[key] = value
            elif key in _CLASS_INT:
                out[key] = int(value)
            elif key == "affinity":
                out[key] = [int(c) for c in value.split(",")]
            else:
                out[key] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"class field {key}={value}: expected a number") from None
    return out


_TYPES = {"str": str, "dist": str, "int": int, "float": float}


def _add_sim_flags(p: argparse.ArgumentParser) -> None:
    """One flag per spec key (from the core's key list, so flags, TOML keys and Python keyword
    arguments cannot drift apart), plus every policy parameter."""
    p.add_argument("--spec",
                   help="TOML file with spec keys ([params], [[classes]]); flags override")
    sections: dict[str, Any] = {}
    for key, help_text in SPEC_KEYS.items():
        kind = SPEC_KINDS[key]
        if kind in ("table", "classes") or key in ("keep_jobs", "keep_schedule"):
            continue  # --class and the policy flags below; --jobs-out and --schedule-out
        section = SPEC_SECTIONS[key]
        group = sections.setdefault(section, p.add_argument_group(f"{section} keys"))
        flag = f"--{key.replace('_', '-')}"
        if kind == "bool":
            group.add_argument(flag, action="store_true", default=None, help=help_text)
        else:
            group.add_argument(flag, type=_TYPES[kind], metavar=kind.upper(), help=help_text)
    p.add_argument("--class", dest="classes", action="append", type=_class_arg,
                   metavar="'name=A fraction=F size=D priority=P ...'",
                   help="a job class (keys: " + ", ".join(CLASS_KEYS) + ")")
    add_policy_param_flags(p, "policy parameters (see `schedlab policies`)", skip=SPEC_KEYS)


def _spec_from_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    spec: dict[str, Any] = load_toml(args.spec) if args.spec else {}
    for key in SPEC_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            spec[key] = value
    params = dict(spec.pop("params", {}) or {})
    for name, value in vars(args).items():
        if name.startswith("param_") and value is not None:
            params[name[len("param_"):]] = value
    policy = spec.pop("policy", "fcfs")
    if params:
        spec["params"] = params
    return policy, spec


def cmd_sim(args: argparse.Namespace) -> int:
    from schedlab.api import simulate
    from schedlab.results import dumps, write_table

    policy, spec = _spec_from_args(args)
    outputs = {key: getattr(args, f"{key}_out") for key in TABLE_OUTPUTS}
    for key, path in outputs.items():
        if path and not path.lower().endswith((".csv", ".parquet")):
            raise spec_error(f"{key}_out", path, "a file name ending in .csv or .parquet")
    result = simulate(policy, keep_jobs=bool(outputs["jobs"]),
                      keep_schedule=bool(outputs["schedule"]) or None, **spec)
    for key, path in outputs.items():
        if path:
            write_table(getattr(result, key), path)
    if args.json:
        print(dumps(result.summary))
        return 0
    from rich.console import Console
    from rich.table import Table

    s = result.summary
    table = Table(title=f"{s['policy']}: {s['jobs']} jobs on {s['cpus']} CPU(s), seed {s['seed']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, label in SUMMARY_ROWS:
        value = s.get(key)
        if isinstance(value, float) and value != value:
            continue
        table.add_row(label, f"{value:.4g}" if isinstance(value, float) else str(value))
    if s["cpus"] > 1:
        for key, label in (("utilization_per_cpu", "utilization per CPU"),
                           ("runnable_mean_per_cpu", "runnable jobs per runqueue")):
            table.add_row(label, " ".join(f"{v:.3g}" for v in s[key]))
    console = Console()
    console.print(table)
    if len(result.classes) > 1:
        console.print(result.classes.to_string(index=False))
    return 0


def cmd_theory(args: argparse.Namespace) -> int:
    from schedlab import theory

    if args.load is not None and args.arrival is not None:
        raise spec_error("load", args.load, "either load or arrival, not both")
    arrival = args.arrival
    if args.load is not None:
        arrival = theory.poisson_at_load(args.load, args.size, cpus=args.cpus)
    if arrival is None:
        raise spec_error("arrival", "(missing)", "an arrival distribution exp:MEAN, or --load")
    try:
        value = theory.mean_response(args.policy, arrival, args.size, cpus=args.cpus)
    except ValueError as e:
        if isinstance(e, SpecError):
            raise
        raise spec_error("theory", f"{args.policy} {arrival} {args.size}", str(e)) from None
    if value is None:
        print(f"no closed form for {args.policy} with arrival {arrival}, size {args.size}, "
              f"cpus {args.cpus}")
        return 1
    print(f"{value:.6g}")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    catalog = policy_catalog()
    if args.json:
        from schedlab.results import dumps

        print(dumps(catalog, indent=2))
        return 0
    for p in catalog:
        aliases = f" (also {', '.join(p['aliases'])})" if p["aliases"] else ""
        print(f"{p['name']}{aliases}: {p['summary']}")
        for q in p["params"]:
            print(f"    --{q['name'].replace('_', '-')}: {q['help']}; {q['allowed']}, "
                  f"default {q['default']}")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from schedlab.quickstart import main as quickstart

    return quickstart(jobs=args.jobs, seed=args.seed, replications=args.replications)


def make_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="schedlab", description="A laboratory for scheduling policies.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("sim", help="simulate one run")
    _add_sim_flags(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    for key, what in TABLE_OUTPUTS.items():
        p.add_argument(f"--{key.replace('_', '-')}-out", metavar="FILE",
                       help=f"write {what} (.csv or .parquet)")
    p.set_defaults(func=cmd_sim)
    p = sub.add_parser("theory", help="closed-form mean response time")
    p.add_argument("--policy", default="fcfs")
    p.add_argument("--arrival", help="exp:MEAN (Poisson arrivals)")
    p.add_argument("--load", type=float, help="utilisation instead of --arrival")
    p.add_argument("--size", default="exp:1")
    p.add_argument("--cpus", type=int, default=1)
    p.set_defaults(func=cmd_theory)
    p = sub.add_parser("policies", help="list policies and their parameters")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_policies)
    p = sub.add_parser("quickstart", help="FCFS, SJF, SRPT, PSJF, RR, PS at load 0.95, with theory")
    p.add_argument("--jobs", type=int, default=2_000_000, help="jobs per replication")
    p.add_argument("--replications", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)
    from schedlab.sweep import add_parsers as add_sweep_parsers  # run, report

    add_sweep_parsers(sub)
    from schedlab.server import add_commands as add_server_commands  # serve, load

    add_server_commands(sub)
    from schedlab.osrun.cli import add_commands as add_os_commands  # os

    add_os_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
