"""`schedlab os`: one run of real processes. Flags are a shorthand for the os spec keys
(docs/os.md); --spec FILE.toml reads the same keys from a file, flags override.

Exit codes: 0 done, 2 bad flag or key, 3 the kernel refused what was asked (the message says
why), 4 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

FLAGS: list[tuple[str, str, Any]] = [
    # (spec key, help, type)
    ("policy", "schedlab policy run by the user-space dispatcher (absent: the kernel)", str),
    ("size", "CPU demand per job (ms, distribution), e.g. det:200", str),
    ("jobs", "jobs in all, split over the processes", int),
    ("time", "stop after this many ms", float),
    ("cpus", "CPUs: a count or a list like 0,1", str),
    ("seed", "random seed", int),
    ("clients", "worker processes running closed loops", int),
    ("batch", "one-shot processes, one job each", int),
    ("think", "think time between jobs (ms, distribution)", str),
    ("sched", "kernel policy: other, batch, idle, fifo, rr, deadline", str),
    ("nice", "nice value for other and batch", int),
    ("rtprio", "real-time priority 1..98 for fifo and rr", int),
    ("runtime", "SCHED_DEADLINE runtime (ms)", float),
    ("deadline", "SCHED_DEADLINE relative deadline (ms)", float),
    ("period", "SCHED_DEADLINE period (ms)", float),
    ("affinity", "CPUs the workers may use, e.g. 0-1", str),
    ("start_pinned", "CPUs the workers start confined to", str),
    ("release_after", "ms until a pinned start is released", float),
    ("io", "I/O after each burst: dsync:BYTES or sleep:DIST", str),
    ("bursts", "CPU bursts per job", int),
    ("rttime", "RLIMIT_RTTIME of fifo/rr workers (ms)", float),
    ("hard_timeout", "kill everything after this many ms", float),
    ("sample", "placement sampling period (ms), 0 off", float),
    ("view", "dispatcher view: global or per_cpu", str),
    ("enforce", "dispatcher enforcement: stop, or fifo (chosen workers at SCHED_FIFO 1)", str),
    ("quiet_wait", "noise gate: wait up to this many ms for a quiet machine", float),
    ("noise_threshold", "noise gate: share of CPU used by others that flags a trial", float),
    ("retry_noisy", "rerun a noisy trial up to this many times", int),
    ("io_dir", "directory for O_DSYNC files", str),
]


def _class_arg(text: str) -> dict[str, Any]:
    """--class 'name=rt sched=fifo rtprio=10 clients=2 size=det:200'"""
    out: dict[str, Any] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"class field '{part}' is not key=value")
        out[key] = _scalar(value)
    return out


def _scalar(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def add_commands(sub: Any) -> None:
    """Registers `schedlab os` on the CLI's subparsers."""
    from schedlab.spec import add_policy_param_flags

    p = sub.add_parser("os", help="run real processes under kernel or user-space policies")
    p.add_argument("--spec", help="TOML file with os spec keys; flags override")
    for key, help_, _ in FLAGS:
        p.add_argument(f"--{key.replace('_', '-')}", dest=f"os_{key}", help=help_)
    p.add_argument("--class", dest="classes", action="append", type=_class_arg,
                   metavar="'name=A sched=fifo rtprio=10 clients=2 ...'", help="a task class")
    add_policy_param_flags(p, "policy parameters (see `schedlab policies`)")
    p.add_argument("--capabilities", action="store_true",
                   help="print what this kernel allows and exit")
    p.add_argument("--keys", action="store_true", help="list the os spec keys and exit")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--jobs-out", help="write the per-job table (.csv or .parquet)")
    p.add_argument("--tasks-out", help="write the per-task table (.csv or .parquet)")
    p.set_defaults(func=cmd_os)


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    from schedlab.spec import load_toml, spec_error

    spec: dict[str, Any] = load_toml(args.spec) if args.spec else {}
    for key, _, cast in FLAGS:
        value = getattr(args, f"os_{key}")
        if value is None:
            continue
        if key == "cpus":
            value = _scalar(value) if "," not in value and "-" not in value else value
        elif cast is not str:
            try:
                value = cast(value)
            except ValueError:
                raise spec_error(key, value, "a number") from None
        spec[key] = value
    if args.classes:
        spec["classes"] = args.classes
    params = dict(spec.pop("params", {}) or {})
    for name, value in vars(args).items():
        if name.startswith("param_") and value is not None:
            params[name[len("param_"):]] = value
    if params:
        spec["params"] = params
    return spec


def cmd_os(args: argparse.Namespace) -> int:
    from schedlab import osrun
    from schedlab.results import dumps, write_table
    from schedlab.spec import spec_error

    if args.capabilities:
        print(dumps(osrun.capabilities(), indent=2))
        return 0
    if args.keys:
        print(osrun.keys_help())
        return 0
    for key in ("jobs_out", "tasks_out"):
        path = getattr(args, key)
        if path and not path.lower().endswith((".csv", ".parquet")):
            raise spec_error(key, path, "a file name ending in .csv or .parquet")
    spec = spec_from_args(args)
    try:
        result = osrun.run(spec)
    except osrun.Refused as e:
        print(f"schedlab: kernel refused {e.what}: {e.reason}", file=sys.stderr)
        return 3
    except osrun.Interrupted as e:
        print(f"schedlab: {e}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("schedlab: interrupted; every worker was killed and reaped", file=sys.stderr)
        return 4
    if args.jobs_out:
        write_table(result.jobs, args.jobs_out)
    if args.tasks_out:
        write_table(result.tasks, args.tasks_out)
    if args.json:
        print(dumps(result.summary))
        return 0
    _print(result)
    return 0


def _print(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    s = result.summary
    console = Console()
    title = (f"{s['policy']}: {s['tasks']} processes, {s['jobs']} jobs on {s['cpus']} CPU(s), "
             f"wall {s['wall_ms']:.0f} ms")
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("response_mean", "response mean (ms)"), ("response_p95", "response p95 (ms)"),
        ("wait_mean", "run-queue wait mean (ms)"), ("throughput", "throughput (jobs/ms)"),
        ("utilization", "utilization"), ("context_switches", "context switches"),
        ("migrations", "migrations"), ("jain_share", "Jain (share/entitled)"),
        ("contended_ms", "contended interval (ms)"), ("measure_overhead", "measurement overhead"),
        ("dispatcher_overhead", "dispatcher CPU / wall"), ("foreign_fraction", "foreign CPU"),
    ]
    for key, label in rows:
        v = s.get(key)
        if v is None or (isinstance(v, float) and v != v):
            continue
        table.add_row(label, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(table)
    cols = ["task", "class", "policy", "nice", "rtprio", "tickets", "cpu_time", "runqueue_wait",
            "context_switches", "migrations", "share", "entitled", "killed"]
    t = result.tasks[[c for c in cols if c in result.tasks.columns]]
    console.print(t.head(40).to_string(index=False))
    if len(result.tasks) > 40:
        console.print(f"... {len(result.tasks) - 40} more tasks")
    if s.get("noisy"):
        console.print(f"[yellow]noisy trial:[/yellow] {'; '.join(s['noise_reasons'])}")
    for name, why in s.get("missing", {}).items():
        console.print(f"missing counter {name}: {why}")
    for w in s.get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {w}")
