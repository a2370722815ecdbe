"""The `schedlab` command. The flags of `sim` and `os` are a shorthand for the keys their world
reads natively (one flag per key of the vocabulary: --context-switch is the key
context_switch), and --spec FILE.toml reads the same keys from a file; every policy parameter
is a flag of its own name.

Exit codes: 0 done, 1 a run or a sweep failed, 2 a bad flag or key (one line naming it),
3 the kernel refused what was asked (os), 4 interrupted (os).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from schedlab import worlds
from schedlab._core import SpecError
from schedlab.clikit import (
    Parser,
    add_key_flags,
    add_policy_param_flags,
    class_arg,
    flag_params,
    spec_from_args,
)
from schedlab.files import TABLE_OUTPUTS, check_outputs, not_empty
from schedlab.summary_rows import replication_warnings, run_notes
from schedlab.vocabulary import (
    KEYS,
    flat_spec,
    policy_catalog,
    replication_count,
    several_policies,
    spec_error,
    summary_units,
    table_units,
    typed,
    unit_text,
)
from schedlab.worlds import os as os_world
from schedlab.worlds import sim as sim_world


def with_units(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary as --json prints it: with `units`, the unit of each of its numbers."""
    return {**summary, "units": summary_units(summary)}


def summary_table(title: str, s: dict[str, Any]) -> Any:
    """A rich table of a summary: the rows of its world (`schedlab.summary_rows.SUMMARY_ROWS`), each
    with its 95% interval where the summary has one, and its unit."""
    from rich.table import Table

    from schedlab.summary_rows import metric_rows

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% interval", justify="right")
    table.add_column("unit")
    for row in metric_rows(s):
        table.add_row(*row)
    return table


TRACE_HELP = ("write the schedule as a Chrome/Perfetto trace: open it in ui.perfetto.dev "
              "(a track per CPU, preemptions and migrations as events; docs/trace.md)")

def native_keys(world: Any) -> list[str]:
    """A world's native keys, in the vocabulary's order."""
    direct = getattr(world, "DIRECT_KEYS", world.NATIVE_KEYS)
    return [k for k in KEYS if k in direct]


# ---------------------------------------------------------------------------------------------
# schedlab sim
# ---------------------------------------------------------------------------------------------


def cmd_sim(args: argparse.Namespace) -> int:
    import signal

    from schedlab.jsonio import dumps

    # The core runs without Python's lock, so Python's Ctrl-C handler would wait for the whole
    # run: the default action ends the process at once (every output is written whole at the
    # end, so nothing is left half-written).
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    spec = spec_from_args(args, native_keys(sim_world))
    outputs = {key: getattr(args, f"{key}_out") for key in TABLE_OUTPUTS}
    _check_trace_out(args.trace_out)
    check_outputs(outputs, args.trace_out, spec.get("load_sample"))
    replications = replication_count(args.replications)
    workers = None if args.workers is None else replication_count(args.workers, "workers")
    # Several policies, not one whose list value has commas (`mlfq:quanta=1,2,4`).
    if several_policies(spec.get("policy")):
        if args.trace_out:
            raise spec_error("trace_out", args.trace_out, "one policy (a trace shows one "
                             "schedule: trace the policies one by one)")
        spec["keep_jobs"] = bool(outputs["jobs"])
        if outputs["schedule"]:
            spec["keep_schedule"] = True
        return _sim_compare(args, spec, outputs, replications, workers)
    # Keys the simulator reads through an experiment file's translation (batch, nice, a
    # kernel policy...): translated here, as there, and said.
    translated: list[str] = []
    spec = sim_world.direct_translation(flat_spec(**spec), translated)
    if not any(outputs.values()) and not args.trace_out:
        # The summary and the class table alone: no table to build, so nothing of pandas to
        # import (issue 12).
        if replications > 1:
            return _sim_replications(args, spec, outputs, replications, workers,
                                     tuple(translated))
        s, classes = sim_world.run_summary_and_classes(spec)
        if args.json:
            print(dumps(_with_classes(with_units(s), classes)))
        else:
            _print_sim_summary(_sim_title(s), s, translated + run_notes(s, spec), classes)
        return 0
    from schedlab.results import write_outputs

    # A trace names each job's class from the per-job table, as simulate(trace_out=) has it.
    spec["keep_jobs"] = bool(outputs["jobs"] or args.trace_out)
    if outputs["schedule"] or args.trace_out:
        spec["keep_schedule"] = True
    if replications > 1:
        return _sim_replications(args, spec, outputs, replications, workers,
                                 tuple(translated))
    result = sim_world.run(spec)
    write_outputs(result.table, outputs)
    _write_trace(result, args.trace_out)
    if args.json:
        print(dumps(_with_classes(with_units(result.summary),
                                  result.classes.to_dict("records"))))
        return 0
    s = result.summary
    _print_sim_summary(_sim_title(s), s, translated + run_notes(s, spec),
                       result.classes.to_dict("records"))
    return 0


def _with_classes(s: dict[str, Any], classes: list[dict[str, Any]]) -> dict[str, Any]:
    """`--json`: the per-class table the text shows below the summary, as `classes` (one
    record per class, units as the summary's keys of the same names), for a run of several
    classes."""
    return {**s, "classes": classes} if len(classes) > 1 else s


def _sim_title(s: dict[str, Any]) -> str:
    return f"{s['policy']}: {s['jobs']} jobs on {s['cpus']} CPU(s), seed {s['seed']}"


def _sim_replications(args: argparse.Namespace, spec: dict[str, Any],
                      outputs: dict[str, str | None], replications: int,
                      workers: int | None, translated: tuple[str, ...] = ()) -> int:
    """`schedlab sim --replications R`: R independent runs on every core (or --workers),
    summarised with Student-t intervals across them. Without a table to write only the runs'
    summaries are made: no table, and no pandas."""
    from schedlab.jsonio import dumps
    from schedlab.stats import across_replications, classes_across_replications
    from schedlab.summary_rows import ESTIMATES

    if not any(outputs.values()) and not args.trace_out:
        both = sim_world.run_replication_summaries_and_classes(spec, replications, workers)
        runs, run_classes = [b[0] for b in both], [b[1] for b in both]
        seeds = [r["seed"] for r in runs]
        s = across_replications(runs, int(spec.get("seed", sim_world.DEFAULT_SEED)), seeds,
                                estimates=ESTIMATES)
    else:
        from schedlab.results import write_outputs

        rep = sim_world.run_replications(spec, replications, workers)
        write_outputs(rep.table, outputs)
        _write_trace(rep, args.trace_out)
        runs, seeds, s = [r.summary for r in rep.runs], rep.seeds, rep.summary
        run_classes = [r.classes.to_dict("records") for r in rep.runs]
    classes = classes_across_replications(run_classes)
    if args.json:
        print(dumps({**_with_classes(with_units(s), classes), "runs": runs}))
        return 0
    jobs = ", ".join(str(r["jobs"]) for r in runs)
    notes = [f"{replications} replications, seeds {', '.join(map(str, seeds))} "
             f"(replication_seed(seed, r), as in experiment files); jobs measured: {jobs}",
             f"95% intervals: Student t across the {replications} replications"]
    notes += [*translated, *replication_warnings(runs, spec)]
    if len(classes) > 1:
        notes.append("by class: counts added up, every other number averaged over the "
                     "replications, with its Student t interval across them")
    _print_sim_summary(f"{s['policy']}: {replications} replications on {s['cpus']} CPU(s), "
                       f"seed {s['seed']}", s, notes, classes)
    return 0


def _sim_compare(args: argparse.Namespace, spec: dict[str, Any],
                 outputs: dict[str, str | None], replications: int,
                 workers: int | None) -> int:
    """`schedlab sim --policy fcfs,srpt,rr:quantum=5`: the policies on one workload and seeds,
    one table with intervals and theory (`schedlab.compare`)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from schedlab.compare import compare
    from schedlab.jsonio import dumps
    from schedlab.results import write_outputs
    from schedlab.summary_rows import ONE_SHOT_TEXT

    text = spec.pop("policy")
    c = compare(text, replications=replications, workers=workers, **spec)
    write_outputs(c.runs_table, outputs)
    if args.json:
        print(dumps(c.to_json()))
        return 0
    workload = ", ".join(f"{k} {spec[k]}" for k in ("arrival", "load", "clients", "size",
                                                    "think", "jobs", "time", "cpus")
                         if k in spec)
    table = Table(title=f"{len(c.labels)} policies on one workload ({workload}), seed {c.seed}",
                  box=box.SIMPLE_HEAD)
    header, rows = c.text_table()
    for i, name in enumerate(header):
        # A header on lines of its own: the name, the unit, "[95% interval]".
        table.add_column(name.replace(" (", "\n(").replace(" [", "\n["),
                         justify="right" if i else "left", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    # One line per policy, whatever the terminal: a narrow one wraps lines instead of rich
    # cutting numbers short, and the table is as wide as its widest cells need (long labels
    # and intervals lost their last digits to "…" at a fixed 150 columns).
    wide = Console(width=100_000)
    needed = wide.measure(table).maximum
    console = Console(width=max(Console().width, 150, needed), markup=False)
    console.print(table)
    console.print(f"The same arrivals and sizes for every policy (seed {c.seed}: common random "
                  f"numbers), measured on the same jobs ({c.warmup_text()}). 95% intervals: "
                  f"{c.interval_method}. Theory: the closed form for "
                  "the queue described (schedlab.theory), — where there is none.")
    one_shot = [name for name, r in zip(c.labels, c.results, strict=True)
                if replications == 1 and r.summary.get("one_shot_batch")]
    if one_shot:
        console.print(f"{', '.join(one_shot)}: {ONE_SHOT_TEXT}")
    doubtful = [row["policy"] for row in c.rows()
                if not row["ci_uncorrelated"] and row["policy"] not in one_shot]
    if doubtful:
        console.print(f"{', '.join(doubtful)}: runs too short to find uncorrelated "
                      "batches: their intervals are NOT to be trusted (more jobs, or "
                      "--replications)", style="bold red")
    for name, r, one in zip(c.labels, c.results, c.specs, strict=True):
        runs = r.runs if replications > 1 else [r]
        for note in {n for run in runs for n in run_notes(run.summary, one) if "WARNING" in n}:
            console.print(f"{name}: {note}", style="bold red")
    return 0


def _print_sim_summary(title: str, s: dict[str, Any], notes: list[str],
                       classes: list[dict[str, Any]] | None = None) -> None:
    """A run's summary table, the per-class table below it when the run has classes, and the
    notes about its numbers."""
    from rich.console import Console
    from rich.table import Table

    from schedlab.summary_rows import class_rows

    table = summary_table(title, s)
    if s["cpus"] > 1:
        for key, label in (("utilization_per_cpu", "utilization per CPU"),
                           ("runnable_mean_per_cpu", "runnable jobs per runqueue")):
            table.add_row(label, " ".join(f"{v:.3g}" for v in s[key]), "",
                          "ratio" if key == "utilization_per_cpu" else "jobs")
    console = Console(markup=False)  # "[low, high]" and labels are data, not styles
    console.print(table)
    header, rows = class_rows(classes)
    if rows:
        by_class = Table(title="by class")
        for name in header:
            by_class.add_column(name, justify="right" if name in ("value", "95% interval")
                                else "left")
        for row in rows:
            by_class.add_row(*row)
        console.print(by_class)
    for note in notes:
        console.print(note, style="bold red" if "WARNING" in note else None)


# ---------------------------------------------------------------------------------------------
# schedlab os
# ---------------------------------------------------------------------------------------------


def cmd_os(args: argparse.Namespace) -> int:
    from schedlab import osrun
    from schedlab.jsonio import dumps
    from schedlab.results import write_outputs

    if args.capabilities:
        print(dumps(osrun.capabilities(), indent=2))
        return 0
    _check_trace_out(args.trace_out)
    outputs = {"jobs": args.jobs_out, "tasks": args.tasks_out}
    check_outputs(outputs, args.trace_out)
    osrun.announce = None  # a terminal shows the wait for a quiet machine
    spec = spec_from_args(args, native_keys(os_world))
    # Several policies, not one whose list value has commas (`mlfq:quanta=1,2,4`).
    if several_policies(spec.get("policy")):
        raise spec_error("policy", spec["policy"], "one policy: real processes compare "
                         "policies in an experiment file (world = \"os\", [[policy]] tables)")
    try:
        result = os_world.run(spec)
    except osrun.Refused as e:
        print(f"schedlab: kernel refused {e.what}: {e.reason}", file=sys.stderr)
        return 3
    except osrun.Interrupted as e:
        print(f"schedlab: {e}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("schedlab: interrupted; every worker was killed and reaped", file=sys.stderr)
        return 4
    write_outputs(result.table, outputs)
    _write_trace(result, args.trace_out)
    if args.json:
        print(dumps(with_units(result.summary)))
        return 0
    _print_os(result)
    return 0


def _check_trace_out(path: str | None) -> None:
    not_empty("trace_out", path)
    if path:
        from schedlab.trace import check_trace_out

        check_trace_out("trace_out", path)


def _write_trace(result: Any, path: str | None) -> None:
    """`--trace-out`: the schedule as a Perfetto/Chrome trace; a note on stderr when the file
    holds less than the run (a capped trace, sampled slices)."""
    if not path:
        return
    from schedlab.trace import write_trace

    meta = write_trace(result, path)
    for note in (meta.get("note"), meta.get("sampled")):
        if note:
            print(f"schedlab: {path}: {note}", file=sys.stderr)


def _print_os(result: Any) -> None:
    from rich.console import Console


    s = result.summary
    console = Console(markup=False)  # the reasons, labels and intervals are data
    title = (f"{s['policy']}: {s['tasks']} processes, {s['jobs']} jobs on {s['cpus']} CPU(s), "
             f"wall {s['wall_ms']:.0f} ms")
    console.print(summary_table(title, s))
    for note in run_notes(s):
        console.print(note, style="bold red" if note.startswith("WARNING") else None)
    cols = ["task", "class", "policy", "nice", "rtprio", "tickets", "cpu_time", "runqueue_wait",
            "context_switches", "migrations", "share", "entitled", "killed"]
    t = result.tasks[[c for c in cols if c in result.tasks.columns]]
    # Each measured column's header carries its unit; ids, levels and text have none.
    units = table_units("tasks", t.columns, "os")
    t = t.rename(columns={c: f"{c} ({unit_text(u)})" for c, u in units.items()
                          if u not in ("id", "level", "text")})
    console.print(t.head(40).to_string(index=False), soft_wrap=True)  # a row is one line
    if len(result.tasks) > 40:
        console.print(f"... {len(result.tasks) - 40} more tasks")
    if s.get("noisy"):
        console.print(f"noisy trial: {'; '.join(s['noise_reasons'])}", style="yellow")
    for name, why in s.get("missing", {}).items():
        console.print(f"missing counter {name}: {why}")
    for w in s.get("warnings", []):
        console.print(f"warning: {w}", style="yellow")


# ---------------------------------------------------------------------------------------------
# schedlab theory, policies, quickstart, run, report
# ---------------------------------------------------------------------------------------------


def cmd_theory(args: argparse.Namespace) -> int:
    import json

    from schedlab import theory

    quantiles = []  # --quantile: repeatable, each a probability or a comma list of them
    for item in (x for text in args.quantile or [] for x in text.split(",")):
        try:
            q = float(item)
        except ValueError:
            q = float("nan")
        if not 0 < q < 1:  # said as typed, with the command line's ways to give several
            raise spec_error("quantile", item.strip() or "(empty)",
                             f"{theory.QUANTILE_ALLOWED} (repeat --quantile or give a comma "
                             "list)")
        quantiles.append(q)
    # The policy's parameters (--quantum of rr and fb, --preemptive of lcfs), as `sim` takes
    # them; the theory refuses one the policy does not have (and a quantum <= 0).
    params = flag_params(args)
    out = theory.answer(args.policy, args.size, arrival=args.arrival, load=args.load,
                        cpus=args.cpus, quantiles=quantiles, clients=args.clients,
                        think=args.think, **params)
    mean, values = out["mean"], out.get("quantiles", {})
    found = mean is not None and None not in values.values()
    if args.json:
        print(json.dumps(out))
        return 0 if found else 1
    given = {k: v for k, v in out.items() if k not in theory.ANSWER_KEYS}  # its parameters
    quantum = given.get("quantum")
    stream = f"arrival {out['arrival']}" if "arrival" in out else \
        f"{out['clients']} clients thinking {out['think']}"
    where = f"{out['policy']} with {stream}, size {args.size}, cpus " \
        f"{args.cpus}" + (f", quantum {quantum:g} ms" if quantum is not None else "") + "".join(
            f", {k} {v}" for k, v in given.items() if k != "quantum")
    if mean is None:
        print(f"schedlab: no closed form for {where} (see schedlab.theory.COVERED)",
              file=sys.stderr)
        return 1
    print(f"mean {mean:.6g} ms")  # scripts read --json (its "unit" is ms)
    if "note" in out:
        print(f"schedlab: {out['note']}", file=sys.stderr)
    if None in values.values():
        print(f"schedlab: no response-time distribution for {where} "
              "(see schedlab.theory.COVERED)", file=sys.stderr)
        return 1
    for label, q in values.items():
        print(f"{label} {q:.6g} ms")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    catalog = policy_catalog()
    if args.json:
        from schedlab.jsonio import dumps

        print(dumps(catalog, indent=2))
        return 0
    for p in catalog:
        aliases = f" (also {', '.join(p['aliases'])})" if p["aliases"] else ""
        print(f"{p['name']}{aliases}: {p['summary']}")
        for q in p["params"]:
            unit = unit_text(q["unit"], "ms of service; packets in the server")
            print(f"    --{q['name'].replace('_', '-')}: {q['help']}; {q['allowed']} "
                  f"({unit}), default {q['default_text']}")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from schedlab.quickstart import main as quickstart

    return quickstart(jobs=args.jobs, seed=args.seed, replications=args.replications)


def cmd_run(args: argparse.Namespace) -> int:
    import pandas as pd

    from schedlab import sweep

    try:
        out = sweep.run(args.file, out=args.out, workers=args.workers, dask=args.dask,
                        quick=args.quick)
    except sweep.SweepFailed as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("schedlab: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    skipped = pd.read_parquet(out / "skipped.parquet") if (out / "skipped.parquet").exists() \
        else pd.DataFrame()
    if len(skipped):
        for (world, reason), g in skipped.groupby(["world", "reason"], sort=False):
            print(f"schedlab: {len(g)} {world} runs skipped: {reason}", file=sys.stderr)
    print(out)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from schedlab import calibration
    from schedlab.clikit import status
    from schedlab.jsonio import dumps

    spec = {k: getattr(args, k) for k in _calibration_keys() if getattr(args, k) is not None}
    for k, v in spec.items():
        typed(k, v, KEYS[k])
    seed = typed("seed", args.seed, KEYS["seed"]) if args.seed is not None else 1
    what = ", ".join(f"{k} {v}" for k, v in spec.items()) or "its defaults"
    how = "three short phases on loopback" if args.world == "server" else \
        "batches of real processes under " + {
            "kernel": "the kernel", "dispatcher": "the dispatcher"}.get(
            str(args.parts), "the kernel and the dispatcher")
    with status(f"calibrating the {args.world} world ({what}): {how}",
                enabled=False if args.json else None):
        lengths = {k: v for k, v in (("phase_ms", args.phase_ms), ("reps", args.reps),
                                     ("parts", args.parts)) if v is not None}
        prof = calibration.calibrate(args.world, args.out, seed=seed, quick=args.quick,
                                     **lengths, **spec)
    for warning in prof["profile"].get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(dumps(prof))
        return 0
    for name, term in prof[args.world].items():
        spread = "".join(f"  {q} {term[q]:.4g}" for q in ("p50", "p95", "p99") if q in term)
        at = f"  ({term['tasks']} processes)" if "tasks" in term else ""
        print(f"{name:15} {term['mean']:.4g} {term['unit']}  95% [{term['low']:.4g}, "
              f"{term['high']:.4g}]{spread}{at}")
    fit = prof["fit"]
    how = (f"{fit['requests']} requests fitted, {fit['left_out']} far off the fit left out"
           if args.world == "server" else
           f"{fit['reps']} repetitions of each phase, {fit['reps_short']} of the short ones")
    print(f"calibrated in {prof['profile']['seconds']:.1f} s ({how}) -> {args.out}")
    return 0


def _calibration_keys() -> list[str]:
    from schedlab import calibration

    return list(dict.fromkeys(k for keys in calibration.WORLDS.values() for k in keys))


def cmd_report(args: argparse.Namespace) -> int:
    from schedlab.report import make_report

    out = make_report(args.dir, html=args.html, text=args.text)
    print(out, end="" if args.text else "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------


def _add_world_flags(p: argparse.ArgumentParser, world: Any, title: str) -> None:
    p.add_argument("--spec", help="TOML file with the same keys ([params], [[classes]]); "
                   "flags override")
    add_key_flags(p, native_keys(world), skip=("keep_jobs", "keep_schedule"))
    direct = getattr(world, "DIRECT_CLASS_KEYS", world.NATIVE_CLASS_KEYS)
    p.add_argument("--class", dest="classes", action="append",
                   type=class_arg(tuple(k for k in world.CLASS_KEYS if k in direct)),
                   metavar="'name=A fraction=F size=D ...'",
                   help="a class (keys: " + ", ".join(sorted(direct)) + ")")
    add_policy_param_flags(p, title)


def _unknown_flag(command: str | None, extra: list[str]) -> str | None:
    """A key of the vocabulary given to a world's command that does not take it (`schedlab
    os --load 0.5`) said as a refusal of that key, with the world's reason where it has one."""
    flag = next((a for a in extra if a.startswith("--")), None)
    if command not in worlds.WORLDS or flag is None:
        return None
    key = flag[2:].partition("=")[0].replace("-", "_")
    if key not in KEYS:
        return None
    at = extra.index(flag)
    value = flag.partition("=")[2] or (extra[at + 1] if at + 1 < len(extra)
                                       and not extra[at + 1].startswith("--") else "(no value)")
    rule = getattr(worlds.module(command), "KEYS", {}).get(key)
    reason = getattr(rule, "reason", None)
    why = f"nothing in schedlab {command}: {reason}" if reason else \
        f"a key of schedlab {command} ({key} is not one; `schedlab {command} --help` lists them)"
    return f"{key} = {value}: expected {why}"


def make_parser() -> argparse.ArgumentParser:
    from schedlab import calibration
    from schedlab.server import add_commands as add_server_commands  # serve, load

    parser = Parser(prog="schedlab", description="A laboratory for scheduling policies.")
    parser.unknown_flag = _unknown_flag
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("sim", help="simulate one run")
    _add_world_flags(p, sim_world, "policy parameters (see `schedlab policies`)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--replications", type=int, default=1, metavar="R",
                   help="independent runs (replication r seeded as in experiment files), "
                   "summarised with Student-t intervals across them; default 1")
    p.add_argument("--workers", type=int, metavar="N",
                   help="threads for --replications; default every core (same results)")
    for key, what in TABLE_OUTPUTS.items():
        p.add_argument(f"--{key.replace('_', '-')}-out", metavar="FILE",
                       help=f"write {what} (.csv or .parquet; missing "
                       "directories are made)")
    p.add_argument("--trace-out", metavar="FILE.json", help=TRACE_HELP)
    p.set_defaults(func=cmd_sim)

    p = sub.add_parser("os", help="run real processes under kernel or user-space policies")
    _add_world_flags(p, os_world, "policy parameters of the user-space dispatcher (see "
                     "`schedlab policies`)")
    p.add_argument("--capabilities", action="store_true",
                   help="print what this kernel allows and exit")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--jobs-out", help="write the per-job table (.csv or .parquet)")
    p.add_argument("--tasks-out", help="write the per-task table (.csv or .parquet)")
    p.add_argument("--trace-out", metavar="FILE.json", help=TRACE_HELP + "; under the kernel's "
                   "own policies, built from the placement samples (--load-sample ms apart)")
    p.set_defaults(func=cmd_os)

    p = sub.add_parser("theory", help="closed-form mean response time, and quantiles of its "
                       "distribution")
    p.add_argument("--policy", default="fcfs", help="scheduling policy (see `schedlab "
                   "policies`); default fcfs")
    p.add_argument("--arrival", metavar="DIST", help="inter-arrival time distribution (ms): "
                   "exp:MEAN, Poisson arrivals (the closed forms' M/G/k)")
    p.add_argument("--load", type=float, help="utilisation per CPU instead of --arrival "
                   "(Poisson arrivals at that load)")
    p.add_argument("--clients", type=int, help="a closed system instead: N clients that each "
                   "think, then submit one job and wait for it")
    p.add_argument("--think", metavar="DIST", help="the clients' think time between jobs (a "
                   "distribution, ms; default det:0)")
    p.add_argument("--size", default="exp:1", metavar="DIST", help="job size distribution, "
                   "in ms of service; default exp:1")
    p.add_argument("--cpus", type=int, default=1, help="identical CPUs sharing one queue; "
                   "default 1")
    p.add_argument("--quantile", action="append", metavar="P",
                   help="also print the P-quantile of the response time, 0 < P < 1 "
                   "(repeatable, or a comma list: 0.5,0.99)")
    p.add_argument("--json", action="store_true",
                   help="print mean and quantiles as one JSON object")
    add_policy_param_flags(p, "policy parameters (rr, fb: a finite --quantum has no closed "
                           "form, and rr without one is its vanishing-quantum limit, processor "
                           "sharing; lcfs: --preemptive)")
    p.set_defaults(func=cmd_theory)
    p = sub.add_parser("policies", help="list policies and their parameters")
    p.add_argument("--json", action="store_true", help="print the catalogue as JSON: each "
                   "policy's aliases, summary and parameters (name, unit, allowed values, "
                   "default)")
    p.set_defaults(func=cmd_policies)
    p = sub.add_parser("quickstart", help="FCFS, SJF, SRPT, PSJF, RR, PS at load 0.95, with theory")
    p.add_argument("--jobs", type=int, default=2_000_000, help="jobs per replication; "
                   "default 2000000")
    p.add_argument("--replications", type=int, default=6, help="independent runs of each "
                   "policy, summarised with Student-t intervals across them; default 6")
    p.add_argument("--seed", type=int, default=1, help="base seed (replication r seeded as "
                   "in experiment files); default 1")
    p.set_defaults(func=cmd_quickstart)

    p = sub.add_parser("run", help="run an experiment file: every sweep point x policy x "
                       "replication (resumes an interrupted sweep)")
    p.add_argument("file", help="experiment file (TOML), e.g. experiments/rr-ps-fcfs/"
                   "experiment.toml")
    p.add_argument("--out", help="results directory; default results/NAME (NAME-quick)")
    p.add_argument("--workers", type=int, help="local worker processes; default every core "
                   "(sim), 1 (server and os worlds, which measure the machine)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on this Dask scheduler instead "
                   "(workers must see the results directory)")
    p.add_argument("--quick", action="store_true", help="scaled down for CI and demos "
                   "([quick] tables of the file, else generic scaling)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="plots and one self-contained HTML file from a results "
                       "directory")
    p.add_argument("dir", help="results directory written by `schedlab run`")
    p.add_argument("--html", help="HTML file to write; default DIR/report.html")
    p.add_argument("--text", action="store_true", help="print the report's tables and "
                   "warnings as text instead (no figure drawn, no file written)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("calibrate", help="measure this machine's costs for the simulator: a "
                       "machine profile (TOML) that `--profile` then models")
    p.add_argument("world", choices=list(calibration.WORLDS), help="the world to measure: "
                   "server (the file server as configured by the flags below, on loopback) or "
                   "os (real processes on --cpus CPUs, the dispatcher with --enforce)")
    p.add_argument("--out", required=True, metavar="FILE.toml", help="profile to write")
    add_key_flags(p, _calibration_keys() + ["seed"])
    p.add_argument("--phase-ms", type=float, metavar="MS", help="server: ms of load per phase; "
                   f"default {calibration.PHASE_MS:g}")
    p.add_argument("--reps", type=int, metavar="N", help="os: repetitions of each phase; "
                   f"default {calibration.REPS}")
    p.add_argument("--parts", metavar="LIST", help="os: what to measure, kernel and/or "
                   "dispatcher, comma-separated: the kernel's classes (for runs under its "
                   "policies) and schedlab's dispatcher (for the dispatched ones); default both")
    p.add_argument("--quick", action="store_true", help="as --quick experiments calibrate: "
                   "server phases of 1 s at most, os phases twice and at most "
                   f"{calibration.QUICK_MANY} processes per CPU")
    p.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    p.set_defaults(func=cmd_calibrate)

    add_server_commands(sub)
    return parser


class _Version(argparse.Action):
    """--version, looked up when asked: importlib.metadata costs ~18 ms at every start."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "show the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"schedlab {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("schedlab")
    except PackageNotFoundError:
        return "(not installed)"


def _dash_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--time -1s` as `--time=-1s`: argparse takes a value that starts with "-" and is not a
    plain negative number for an option and refuses it ("expected one argument"), where the
    value's own check names the key, the value and what is allowed."""
    takes_value, options = set(), set()
    parsers = [parser]
    while parsers:
        p = parsers.pop()
        for action in p._actions:
            options.update(action.option_strings)
            if action.option_strings and action.nargs is None and action.const is None:
                takes_value.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                parsers += list(action.choices.values())
    out: list[str] = []
    it = iter(argv)
    for token in it:
        if token == "--":
            out += [token, *it]
            break
        out.append(token)
        if token in takes_value:
            value = next(it, None)
            if value is None:
                break
            if value.startswith("-") and not value.startswith("--") and value not in options:
                out[-1] = f"{token}={value}"
            else:
                out.append(value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(_dash_values(parser, sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except SpecError as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C anywhere a command did not handle it itself (before a run started, say): one
        # line and the shell's code for SIGINT, never a traceback. Children die with us
        # (schedlab.lifetime).
        print("schedlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`schedlab sim --json | head`): end quietly, as a shell tool does.
        # Python would print the error again on flushing stdout at exit; point it at devnull.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
