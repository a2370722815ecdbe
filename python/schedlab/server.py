"""The server world: a real HTTP file server whose request queue is ordered by a schedlab
policy, driven by schedlab's load generator over real sockets on 127.0.0.1.

    schedlab.server.run(spec) -> schedlab.results.Result

starts `python -m schedlab.server serve` as a child process on a free port, serves a file
catalogue generated in a temporary root, runs the load in this process, stops the server with
SIGTERM (it drains) and joins the generator's per-request table with the server's per-request
log. The spec's keys are the vocabulary's (`schedlab.vocabulary`): `cpus` are the worker
threads, `size` is ms of service through the cost model; `docs/server.md` lists them, and
`schedlab.worlds.server` says how the server world reads every other key. This module also
holds the `schedlab serve` and `schedlab load` commands (`add_commands`), the server program's
own configuration.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schedlab._core as _core
from schedlab import noise
from schedlab._core import SpecError
from schedlab.clikit import Parser, add_policy_param_flags, flag_params
from schedlab.files import check_writable, make_parent, unmake
from schedlab.lifetime import alive, child_env, die_with_parent
from schedlab.vocabulary import Params, find_policy, param_value, parse_policies, spec_error

if TYPE_CHECKING:  # numpy and pandas are imported where they are used: the command line
    import numpy as np  # builds its parser from this module and should start at once
    import pandas as pd

    from schedlab.results import Result

# pandas (with schedlab.results) is imported by the functions that build tables, not here:
# the command line's parser imports this module for `serve` and `load` (issue 12).

# The keys the server world reads (their meaning, unit and help: `schedlab.vocabulary`).
NATIVE_KEYS = frozenset({
    "policy", "params", "arrival", "load", "size", "jobs", "time", "clients", "think", "classes",
    "bytes", "files", "catalogue", "zipf", "burst", "cpus", "buffer", "packet", "packet_unit",
    "cost", "cost_mode", "max_connections", "header_timeout", "idle_timeout", "send_timeout",
    "drain_timeout", "seed", "warmup", "warmup_time", "precision", "max_time", "threads",
    "connections", "timeout", "miss", "keep_alive", "keep_jobs", "hdr_log", "server_log",
    "noise_threshold", "retry_noisy"})
# Others' share of the machine's CPUs that flags a run noisy (the os world's default too).
DEFAULT_NOISE_THRESHOLD = 0.1
NATIVE_CLASS_KEYS = frozenset({"name", "fraction", "size", "bytes", "priority", "tickets",
                               "weight", "nice", "deadline", "clients", "prefix"})
EXTRA_COLUMNS = ["sent", "status", "error", "path", "bytes", "server_arrival", "service",
                 "turns"]
DEFAULT_FILES = 100
MAX_CATALOGUE_BYTES = 4 << 30
LINE = b"schedlab serves this line as part of a generated catalogue file.\n"  # 64 bytes
LINE_BYTES = len(LINE)
DEFAULT_PACKET_BYTES = 65_536
DEFAULT_PACKET_LINES = 10


def packet_ms(spec: dict[str, Any]) -> tuple[float, int, float]:
    """(ms per packet by the cost model, bytes per packet, per-byte ms) of a spec's `cost`,
    `packet` and `packet_unit`; a bad cost raises SpecError naming `cost`."""
    cost = _core.parse_cost(str(spec.get("cost", "none")))
    packet = spec.get("packet")
    if spec.get("packet_unit", "bytes") == "lines":
        nbytes = int(packet or DEFAULT_PACKET_LINES) * LINE_BYTES
    else:
        nbytes = int(packet or DEFAULT_PACKET_BYTES)
    per = float(cost["per_byte_ms"])
    return nbytes * per, nbytes, per


# ---------------------------------------------------------------------------------------------
# Spec -> plan
# ---------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """A validated server-world spec: what to serve, how to load it."""

    policy: str
    params: dict[str, Any]
    cost: dict[str, float]
    serve: dict[str, Any]
    load: dict[str, Any]
    files: list[tuple[str, int]]
    classes: list[str]
    spec: dict[str, Any] = field(default_factory=dict)
    # warmup = "auto": the requests MSER-5 discards are cut after the run (results.py).
    auto_warmup: bool = False
    noise_threshold: float = DEFAULT_NOISE_THRESHOLD
    # Runs flagged noisy are served again, up to this many times (the os world's key).
    retry_noisy: int = 0

    def service_ms(self, nbytes: np.ndarray) -> np.ndarray:
        """Uncontended service time by the cost model (NaN when there is no emulated cost)."""
        import numpy as np

        fixed, per = self.cost["fixed_ms"], self.cost["per_byte_ms"]
        if fixed == 0 and per == 0:
            return np.full(len(nbytes), np.nan)
        return fixed + np.asarray(nbytes, dtype=float) * per


def _num(key: str, value: Any, *, integer: bool = False, low: float = 0.0,
         strict: bool = False) -> Any:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = value > low if strict else value >= low
    if not ok:
        kind = "a whole number" if integer else "a number"
        raise spec_error(key, value, f"{kind} {'>' if strict else '>='} {low:g}")
    return int(value) if integer else float(value)


def _bytes_from_ms(key: str, given: Any, ms: np.ndarray, cost: dict[str, float]
                   ) -> np.ndarray:
    """Sim sizes (ms of service) to file sizes: fixed + B * per_byte = size. `given` is the
    value as written, for the message."""
    import numpy as np

    if cost["per_byte_ms"] <= 0:
        raise spec_error(key, given, "a cost with a per-size part (e.g. cost = "
                         "'0ms+0.1ms/KB') to turn ms into bytes, or `bytes` in bytes")
    return np.maximum(0, np.round((ms - cost["fixed_ms"]) / cost["per_byte_ms"])).astype(int)


CATALOGUE_DRAWS = 200_000  # draws behind a catalogue's strata


def _sizes(key: str, text: Any, n: int, seed: int, cost: dict[str, float],
           in_ms: bool) -> np.ndarray:
    """n file sizes that represent the law: many draws, sorted, cut into n strata of equal
    probability, each file the mean of its stratum (in random order). A catalogue of n
    independent draws would carry its own mean: with a heavy tail, 200 files can be 30% off
    the law, and every replication would serve a different workload from the simulator's."""
    import numpy as np

    if isinstance(text, int | float) and not isinstance(text, bool):
        text = f"det:{text}"
    per = max(1, -(-CATALOGUE_DRAWS // n))
    draws = np.sort(np.asarray(_core.sample_dist(str(text), n * per, seed, key)))
    values = draws.reshape(n, per).mean(axis=1)
    values = np.random.default_rng(seed).permutation(values)
    if in_ms:
        return _bytes_from_ms(key, text, values, cost)
    return np.maximum(0, np.round(values)).astype(int)


def plan(spec: dict[str, Any]) -> Plan:
    """Validates a server-world spec and draws its catalogue; writes nothing."""
    import numpy as np

    spec = {k: v for k, v in spec.items() if v is not None}
    policy_name = str(spec.get("policy", "fcfs"))
    info = find_policy(policy_name)
    param_names = {p["name"] for p in info["params"]}
    params: dict[str, Any] = dict(spec.get("params") or {})
    for key in list(spec):
        if key in NATIVE_KEYS:
            continue
        if key in param_names:
            params[key] = spec.pop(key)
            continue
        known = sorted({*NATIVE_KEYS, *param_names})
        raise spec_error(key, spec[key], f"a server-world key ({', '.join(known)})")
    params = {k: param_value(k, v) for k, v in params.items()}
    _core.check_discrete(policy_name, params, _core.SERVE_FLUID_REFUSED)
    seed = _num("seed", spec.get("seed", 1), integer=True)
    cost = _core.parse_cost(str(spec.get("cost", "none")))
    workers = _num("cpus", spec.get("cpus", 2), integer=True, low=1)

    # Classes: declared, plus those named by bursts and catalogue entries.
    declared = list(spec.get("classes") or [])
    classes: list[dict[str, Any]] = []
    for i, c in enumerate(declared):
        if not isinstance(c, dict):
            raise spec_error(f"classes[{i}]", c, "a table of class keys")
        for k in c:
            if k not in NATIVE_CLASS_KEYS:
                raise spec_error(f"classes[{i}].{k}", c[k],
                                 f"a class key ({', '.join(sorted(NATIVE_CLASS_KEYS))})")
        classes.append({"name": str(c.get("name", i)), **{k: v for k, v in c.items()
                                                          if k != "name"}})
    names = [c["name"] for c in classes]
    _core.check_class_names(names)

    def class_of(key: str, name: Any) -> str | None:
        if name is None:
            return None
        name = str(name)
        if name not in names:
            names.append(name)
            classes.append({"name": name})
        return name

    files: list[tuple[str, int]] = []
    targets: list[dict[str, Any]] = []
    catalogue = spec.get("catalogue")
    if catalogue is not None:
        for i, entry in enumerate(catalogue):
            key = f"catalogue[{i}]"
            if not isinstance(entry, dict) or "bytes" not in entry:
                raise spec_error(key, entry, "a table {path, bytes, weight, class}")
            path = str(entry.get("path", f"/c{i:04d}.bin"))
            if not path.startswith("/") or ".." in path.split("/"):
                raise spec_error(f"{key}.path", path, "a path starting with / without ..")
            nb = _num(f"{key}.bytes", entry["bytes"], integer=True)
            cls = class_of(key, entry.get("class"))
            files.append((path, nb))
            targets.append({"path": path, "weight": _num(f"{key}.weight",
                                                         entry.get("weight", 1.0)),
                            "class": cls})
    burst_groups: list[dict[str, Any]] = []
    for i, g in enumerate(spec.get("burst") or []):
        key = f"burst[{i}]"
        if not isinstance(g, dict):
            raise spec_error(key, g, "a table {at, count, bytes|size|path, class}")
        at = _num(f"{key}.at", g.get("at", 0.0))
        count = _num(f"{key}.count", g.get("count", 1), integer=True, low=1)
        cls = class_of(key, g.get("class"))
        if "path" in g:
            path = str(g["path"])
        elif "bytes" in g or "size" in g:
            if "bytes" in g:
                nb = _num(f"{key}.bytes", g["bytes"], integer=True)
            else:
                ms = _num(f"{key}.size", g["size"])
                nb = int(_bytes_from_ms(f"{key}.size", g["size"], np.array([ms]), cost)[0])
            path = f"/burst/{nb}.bin"
            if path not in {f[0] for f in files}:
                files.append((path, nb))
        else:
            raise spec_error(key, g, "one of bytes, size or path")
        burst_groups.append({"at": at, "count": count, "path": path, "class": cls})

    # The workload: exactly one of closed (clients), open (arrival, rate or load) or burst.
    class_clients = any(c.get("clients") for c in classes)
    if "clients" in spec and class_clients:
        raise spec_error("clients", spec["clients"], "either clients or classes[].clients, "
                         "not both")
    closed = "clients" in spec or class_clients
    open_keys = [k for k in ("arrival", "load") if k in spec]
    if closed + bool(open_keys) + bool(burst_groups) != 1:
        given = ([k for k in ("clients",) if closed] + open_keys
                 + (["burst"] if burst_groups else []))
        raise spec_error(given[0] if given else "arrival", ", ".join(given) or "(none)",
                         "one workload: clients (closed loop), arrival or load (open loop), "
                         "or burst")

    # A generated catalogue: `files` files per class (or in all), sizes drawn from the class's
    # size (ms, through the cost) or bytes distribution, else the global one.
    nfiles = _num("files", spec.get("files", DEFAULT_FILES), integer=True, low=1)
    have_dist = any(k in spec for k in ("size", "bytes")) or any(
        "size" in c or "bytes" in c for c in classes)
    wants_catalogue = catalogue is None and (not burst_groups or have_dist)
    if "size" in spec and "bytes" in spec:
        raise spec_error("bytes", spec["bytes"], "either size (ms) or bytes, not both")
    if wants_catalogue:
        groups = [c for c in classes] if classes else [None]
        for gi, c in enumerate(groups):
            if c is not None and "size" in c and "bytes" in c:
                raise spec_error(f"classes[{gi}].bytes", c["bytes"], "either size or bytes")
            if c is not None and ("size" in c or "bytes" in c):
                in_ms = "size" in c
                key, text = (f"classes[{gi}].size", c["size"]) if in_ms else \
                    (f"classes[{gi}].bytes", c["bytes"])
            elif "bytes" in spec:
                in_ms, key, text = False, "bytes", spec["bytes"]
            elif "size" in spec or cost["per_byte_ms"] > 0:
                in_ms, key, text = True, "size", spec.get("size", "exp:1")  # the sim's default
            else:  # no size law and no cost to turn one into bytes: 1 KiB files
                in_ms, key, text = False, "bytes", "det:1024"
            if c is not None and not PATH_SEGMENT.fullmatch(c["name"]):
                # The class's files lie in a directory of its name under the served root.
                raise spec_error(f"classes[{gi}].name", c["name"], "a name usable as a "
                                 "directory of the served files: letters, digits, '.', '_' "
                                 "and '-', not '.' or '..'")
            sizes = _sizes(key, text, nfiles, seed * 1000 + gi, cost, in_ms)
            prefix = f"/{c['name']}" if c is not None else ""
            for j, nb in enumerate(sizes):
                path = f"{prefix}/f{j:04d}.bin"
                files.append((path, int(nb)))
                targets.append({"path": path, "weight": 1.0,
                                "class": c["name"] if c is not None else None})
    total = sum(nb for _, nb in files)
    if total > MAX_CATALOGUE_BYTES:
        raise spec_error("files", nfiles, f"a catalogue under {MAX_CATALOGUE_BYTES >> 30} GiB "
                         f"(this one would take {total / 2**30:.1f} GiB): fewer files or "
                         "smaller sizes")

    load: dict[str, Any] = {"seed": seed, "progress": False}
    for k in ("jobs", "time", "warmup", "threads", "connections", "timeout", "miss",
              "keep_alive", "zipf"):
        if k in spec:
            load[k] = spec[k]
    # Until precise: the generator looks at the mean response with the simulator's rule, and
    # max_time caps its sending (time is the length of a run that is not until precise).
    if "precision" in spec:
        load["precision"] = _num("precision", spec["precision"], strict=True)
        if "time" in spec:
            raise spec_error("time", spec["time"], "no time with precision: max_time caps a "
                             "run until precise")
        if "max_time" not in spec:
            raise spec_error("precision", spec["precision"], "a cap too: max_time (ms of "
                             "sending)")
        load["time"] = _num("max_time", spec["max_time"], strict=True)
    elif "max_time" in spec:
        raise spec_error("max_time", spec["max_time"], "max_time with precision only (time "
                         "is the length of a run)")
    # Not yet the default here (it is in the simulator): the simulator's pilots find the cut
    # before the run and measure `jobs` after it, while a real run finds it afterwards, so
    # the cut comes out of the `jobs` sent.
    auto_warmup = spec.get("warmup") == "auto"
    if auto_warmup:
        load.pop("warmup", None)
    if closed:
        if "clients" in spec:
            load["clients"] = _num("clients", spec["clients"], integer=True, low=1)
        else:
            load["clients"] = sum(int(c.get("clients") or 0) for c in classes)
        if "think" in spec:
            load["think"] = _dist_text(spec["think"])
    elif burst_groups:
        load["burst"] = burst_groups
    elif "arrival" in spec:
        load["arrival"] = _dist_text(spec["arrival"])
    else:
        util = _num("load", spec["load"], strict=True)
        mean = _mean_service(files, targets, classes, cost)
        if not mean > 0:
            raise spec_error("load", util, "a cost model giving requests a service time > 0 "
                             "(load = rate x mean service / workers)")
        load["arrival"] = f"exp:{mean * workers / util}"
    if not burst_groups:
        load["targets"] = [{k: v for k, v in t.items() if v is not None} for t in targets]
    if classes:
        load["classes"] = [{"name": c["name"], **({"fraction": float(c["fraction"])}
                                                  if "fraction" in c else {}),
                            **({"clients": int(c["clients"])} if c.get("clients") else {})}
                           for c in classes]
    if not burst_groups and not {"jobs", "time", "max_time"} & set(spec):
        raise spec_error("jobs", "(missing)", "jobs or time (when to stop sending)")
    warmup_time = spec.get("warmup_time")
    if warmup_time is not None:
        _num("warmup_time", warmup_time)

    serve: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "cpus": workers,
                             "policy": info["name"], "seed": seed, "announce": True}
    if params:
        serve["params"] = params
    for k in ("buffer", "packet", "packet_unit", "cost", "cost_mode", "max_connections",
              "header_timeout", "idle_timeout", "send_timeout", "drain_timeout"):
        if k in spec:
            serve[k] = spec[k]
    if classes:
        serve["classes"] = [
            {"name": c["name"], "prefix": c.get("prefix", f"/{c['name']}/"),
             **{k: float(c[k]) for k in ("priority", "tickets", "weight", "nice", "deadline")
                if k in c}}
            for c in classes]
    for k in ("server_log", "hdr_log"):  # kept where the user asked: refused before any run
        if spec.get(k) is not None:
            check_writable(k, spec[k], ())
    threshold = _num("noise_threshold", spec.get("noise_threshold", DEFAULT_NOISE_THRESHOLD))
    if threshold > 1:
        raise spec_error("noise_threshold", threshold, "a fraction of the CPUs, from 0 to 1")
    retry = _num("retry_noisy", spec.get("retry_noisy", 0), integer=True)
    p = Plan(policy=info["name"], params=params, cost=cost, serve=serve, load=load,
             files=files, classes=[c["name"] for c in classes], spec=dict(spec),
             auto_warmup=auto_warmup, noise_threshold=threshold, retry_noisy=retry)
    return p


def _dist_text(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"det:{value}"
    return str(value)


def _mean_service(files: list[tuple[str, int]], targets: list[dict[str, Any]],
                  classes: list[dict[str, Any]], cost: dict[str, float]) -> float:
    """Mean service time of a request by the cost model, with the generator's picking rule."""
    import numpy as np

    size = dict(files)

    def mean_of(ts: list[dict[str, Any]]) -> float:
        w = np.array([t["weight"] for t in ts], dtype=float)
        s = np.array([cost["fixed_ms"] + size[t["path"]] * cost["per_byte_ms"] for t in ts])
        return float((w * s).sum() / w.sum()) if w.sum() > 0 else float("nan")

    if not classes:
        return mean_of(targets)
    fr = np.array([float(c.get("fraction", 1.0)) for c in classes])
    means = np.array([mean_of([t for t in targets if t["class"] in (c["name"], None)])
                      for c in classes])
    return float((fr * means).sum() / fr.sum())


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    """Checks a server-world spec without starting anything; raises SpecError naming the key."""
    p = plan(spec)
    with tempfile.TemporaryDirectory(prefix="schedlab-validate-") as root:
        _core.serve_validate({**p.serve, "root": root})
        _core.load_validate({**p.load, "url": "http://127.0.0.1:9/"})
    return p.spec


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


def write_catalogue(root: Path, files: list[tuple[str, int]]) -> None:
    """Files of text lines (so packets of lines make sense), truncated to their size."""
    chunk = LINE * 16384  # 1 MiB
    for path, nbytes in files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            left = nbytes
            while left > 0:
                part = chunk[: min(left, len(chunk))]
                f.write(part)
                left -= len(part)


class ServerProcess:
    """`python -m schedlab.server serve --config FILE` as a child; stop() sends SIGTERM."""

    def __init__(self, config: dict[str, Any], workdir: Path, timeout: float = 30.0):
        cfg_path = workdir / "serve.json"
        cfg_path.write_text(json.dumps(config))
        self.stderr_path = workdir / "serve.stderr"
        self._stderr = open(self.stderr_path, "wb")
        env = child_env()  # the server dies with whoever started it
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "schedlab.server", "serve", "--config", str(cfg_path)],
            stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.url = self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> str:
        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        line = b""
        import time

        deadline = time.monotonic() + timeout
        while b"\n" not in line:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                self.kill()
                raise RuntimeError(f"schedlab serve did not start within {timeout} s: "
                                   f"{self._err()}")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                self.proc.wait()
                err = self._err()
                prefix = "schedlab: error: "
                if self.proc.returncode == 2 and err.startswith(prefix):
                    # The server refused its configuration: bad input, named by its key (a
                    # SpecError as the server's own would be), not a crash.
                    raise SpecError(err[len(prefix):].strip().splitlines()[0])
                raise RuntimeError(f"schedlab serve exited ({self.proc.returncode}): {err}")
            line += chunk
        text = line.decode(errors="replace")
        for word in text.split():
            if word.startswith("http://"):
                return word
        self.kill()
        raise RuntimeError(f"schedlab serve said {text!r}, not where it listens")

    def _err(self) -> str:
        if not self._stderr.closed:  # stop() closed it: what it wrote is in the file
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace").strip()[-2000:]

    def stop(self, timeout: float) -> int:
        """SIGTERM, then wait for the drain; SIGKILL after `timeout` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"schedlab serve did not drain within {timeout} s") from None
        finally:
            self._stderr.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


WORK_PREFIX = "schedlab-server-"


def _work_dir() -> tempfile.TemporaryDirectory[str]:
    """A run's scratch directory (the catalogue, the request log), named after the process
    that owns it. A sweep killed with SIGKILL takes its runs along before they can remove
    theirs (kill -9 leaves no process to clean up), so each run first removes the ones whose
    owner is gone."""
    for d in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*-*"):
        owner = d.name[len(WORK_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not alive(int(owner)):
            shutil.rmtree(d, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-")


def run(spec: dict[str, Any]) -> Result:
    """Runs one server-world spec and returns a Result in the common schema."""
    import pandas as pd

    p = plan(spec)
    with _work_dir() as tmp:
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        write_catalogue(root, p.files)
        log_path = Path(spec.get("server_log") or work / "requests.csv")
        stats_path = work / "stats.json"
        hdr = spec.get("hdr_log")
        made = [d for kept in (spec.get("server_log"), hdr) if kept is not None
                for d in make_parent(kept)]
        config = {**p.serve, "root": str(root), "server_log": str(log_path),
                  "stats": str(stats_path)}
        attempts = 0
        try:
            while True:
                # A fresh server each time: a retried run starts as the first did (the log
                # and the stats are written anew).
                raw = _serve_once(p, config, work, hdr)
                attempts += 1
                if not raw["noise"]["noisy"] or attempts > p.retry_noisy:
                    break
        except BaseException:
            unmake(made)  # those still empty: a run that failed before writing its logs
            raise
        stats = json.loads(stats_path.read_text())
        log = pd.read_csv(log_path) if log_path.exists() and log_path.stat().st_size else None
        result = _result(p, raw, stats, log)
        result.summary["attempts"] = attempts
        noise.log_disturbed("server", result.summary)
        return result


def _serve_once(p: Plan, config: dict[str, Any], work: Path, hdr: Any) -> dict[str, Any]:
    """Starts the server, runs the load against it, stops it; the load's raw result with what
    others used of the machine meanwhile (`noise`)."""
    drain_s = float(p.serve.get("drain_timeout", 30_000)) / 1e3 + 15
    server = ServerProcess(config, work)
    try:
        load_cfg = {**p.load, "url": server.url}
        if hdr:
            load_cfg["hdr_log"] = str(hdr)
        before = _machine_reading(server.proc.pid)
        raw = _core.load(load_cfg)
        raw["noise"] = _others_meanwhile(before, _machine_reading(server.proc.pid),
                                         p.noise_threshold)
    except BaseException:
        server.kill()
        raise
    code = server.stop(drain_s)
    if code != 0:
        raise RuntimeError(f"schedlab serve exited with {code}: {server._err()}")
    return raw


def _machine_reading(server_pid: int) -> dict[str, float]:
    """The machine's CPU counters and this run's own CPU time (this process: the load
    generator's threads; the server's process), for the noise gate."""
    busy, steal = noise.cpu_ticks()
    hz = noise.user_hz()
    return {"busy_ms": busy * 1000 / hz, "steal_ms": steal * 1000 / hz,
            "ours_ms": time.process_time() * 1000 + (noise.process_cpu_ms(server_pid) or 0.0),
            "wall_ms": time.monotonic() * 1000}


def _others_meanwhile(before: dict[str, float], after: dict[str, float],
                      threshold: float) -> dict[str, Any]:
    """What others used of the machine's CPUs while the load ran (`schedlab.noise`: the os
    world's rule, over every CPU: the server and its clients may run on any)."""
    d = {k: after[k] - before[k] for k in before}
    return noise.verdict(d["busy_ms"], d["steal_ms"], d["ours_ms"], d["wall_ms"],
                         os.cpu_count() or 1, threshold)


# A class's name as the directory of its generated files (and a URL path segment).
PATH_SEGMENT = re.compile(r"(?!\.\.?$)[A-Za-z0-9._-]+")


def served(requests: pd.DataFrame) -> pd.Series:
    """The requests answered with their file (HTTP 2xx). A refusal (503 from a full server),
    a 403 or a 404 is an answer but not a service: its time is no response time of a file,
    and it is counted in `status`, not measured."""
    return (requests["error"] == 0) & requests["status"].between(200, 299)


def _result(p: Plan, raw: dict[str, Any], stats: dict[str, Any],
            log: pd.DataFrame | None) -> Result:
    from schedlab.results import Result, cut_at_precise, cut_auto_warmup

    sent = request_table(raw, p, log, with_warmup=True)
    jobs = sent[~sent["warm"]].drop(columns="warm").reset_index(drop=True)
    schedule = schedule_table(log, raw["summary"]["start_ns"], jobs)
    counted = dict(raw["summary"])
    warmup_time = p.spec.get("warmup_time")
    if warmup_time is not None:
        early = jobs["arrival"] < float(warmup_time)
        counted["warmup"] += int(early.sum())
        jobs = jobs[~early].reset_index(drop=True)
    auto_cut = 0
    if p.auto_warmup:
        jobs, auto_cut = cut_auto_warmup(jobs)
        counted["warmup"] += auto_cut
    ok = jobs[served(jobs)]
    if counted.get("stopped_precise"):
        ok = cut_at_precise(ok, p.load["precision"], p.load.get("jobs"))
    summary, classes, tasks = _summary(p, ok, jobs, counted, stats)
    if "noise" in raw:
        n = raw["noise"]
        summary.update({k: n[k] for k in ("noisy", "noise_reasons", "foreign_fraction",
                                          "steal_fraction")})
    trace = replay_trace(sent, int(p.spec.get("seed", 1)))
    if trace is not None:
        # Replayed until the run stopped sending, then drained, as the server run was.
        trace.attrs["end"] = float(raw["summary"]["sending_ended"])
        # The requests a replay leaves out at its start: the generator's warm-up and the
        # ones `warmup = "auto"` cut (failed requests are in neither the trace nor the count).
        warm_ok = int((sent["warm"] & served(sent)).sum())
        trace.attrs["warmup"] = warm_ok + auto_cut
    return Result(summary=summary, jobs=jobs, classes=classes, tasks=tasks,
                  schedule=schedule, spec={"world": "server", **p.spec}, replay_trace=trace)


def replay_trace(sent: pd.DataFrame, seed: int = 1) -> pd.DataFrame | None:
    """A real run's requests as a trace for the simulator, warm-up included, failed requests
    left out: a closed-loop run as a closed trace (columns task, think, size: each client's
    requests in the order it sent them, the think before each, its send minus the arrival of
    its previous response, from the run's start for its first); an open-loop run as arrival,
    size. Sizes are ms of service by the cost model (the table's `size`). Simulated with the
    run's policy and machine it is the same workload request for request, so a comparison
    with the run is paired. None when the cost model gives no service time.

    A closed trace goes on past each client's recorded requests with as many again, drawn
    (`seed`) from the run's own thinks and sizes: replayed until the run stopped sending
    (`time` = its end, `drain`), a client the model serves faster than the server did keeps
    sending, as it would have, instead of leaving the others a lighter machine at the end."""
    import numpy as np
    import pandas as pd

    ok = sent[served(sent)]
    if len(ok) == 0 or not np.isfinite(ok["size"].to_numpy(dtype=float)).all():
        return None
    if (ok["client"] < 0).all():
        o = ok.sort_values("arrival", kind="stable")
        return pd.DataFrame({"arrival": o["arrival"].to_numpy(), "size": o["size"].to_numpy()})
    j = ok[ok["client"] >= 0].sort_values(["client", "arrival"], kind="stable")
    previous = j.groupby("client")["completion"].shift(1)
    clients = {c: i for i, c in enumerate(sorted(j["client"].unique()))}
    think = (j["arrival"] - previous.fillna(0.0)).clip(lower=0.0).to_numpy()
    task = j["client"].map(clients).to_numpy()
    size = j["size"].to_numpy()
    # The thinks between requests (a client's first is from the run's start, not a think).
    thinks = think[previous.notna().to_numpy()]
    if not len(thinks):
        thinks = think
    rng = np.random.default_rng(seed)
    more = int(np.bincount(task).max())
    tasks = np.repeat(np.arange(len(clients)), more)
    return pd.DataFrame({
        "task": np.concatenate([task, tasks]),
        "think": np.concatenate([think, rng.choice(thinks, len(tasks))]),
        "size": np.concatenate([size, rng.choice(size, len(tasks))]),
    })


SCHEDULE_COLUMNS = ["cpu", "job", "task", "start", "end"]


def schedule_table(log: pd.DataFrame | None, start_ns: int,
                   jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The server's turns in the common schedule schema: one row per turn of a request on a
    worker (`cpu` = the worker, `job` = the request id, `task` = its client or -1), ms since
    the generator's start, in start order. From the log's `segments` (worker:start_ns:end_ns
    per turn); the requests the master answered itself (errors) ran on no worker."""
    import numpy as np
    import pandas as pd

    if log is None or not len(log) or "segments" not in log:
        return pd.DataFrame(columns=SCHEDULE_COLUMNS)
    log = log[log["request_id"] >= 0].drop_duplicates("request_id", keep="last")
    log = log[log["segments"].notna() & (log["segments"].astype(str) != "")]
    if not len(log):
        return pd.DataFrame(columns=SCHEDULE_COLUMNS)
    turns = log["segments"].astype(str).str.split(";").explode()
    parts = turns.str.split(":", expand=True).astype(np.int64)
    request = log["request_id"].astype(np.int64).reindex(turns.index).to_numpy()
    client = np.full(len(request), -1, dtype=np.int64)
    if jobs is not None and len(jobs):
        by_id = dict(zip(jobs["job"].astype(np.int64), jobs["client"].astype(np.int64),
                         strict=True))
        client = np.array([by_id.get(int(r), -1) for r in request], dtype=np.int64)
    out = pd.DataFrame({
        "cpu": parts[0].to_numpy(dtype=np.int64),
        "job": request,
        "task": client,
        "start": (parts[1].to_numpy() - start_ns) / 1e6,
        "end": (parts[2].to_numpy() - start_ns) / 1e6,
    })
    return out.sort_values(["start", "cpu"], kind="stable").reset_index(drop=True)


def request_table(raw: dict[str, Any], p: Plan | None = None,
                  log: pd.DataFrame | None = None, with_warmup: bool = False) -> pd.DataFrame:
    """The generator's measured requests in the common schema, joined with the server's log
    if any; `with_warmup`: every request sent, and a column `warm` (sent in the warm-up).

    Columns the client cannot know (cpu, first_run, wait, context_switches, migrations) come
    from the server's log; without it they are -1 (cpu) or NaN.
    """
    import numpy as np
    import pandas as pd

    from schedlab.results import JOB_COLUMNS

    r = {k: np.asarray(v) for k, v in raw["requests"].items()}
    n = len(r["id"])
    targets = raw["targets"]
    df = pd.DataFrame({
        "job": r["id"].astype(np.uint64),
        "client": r["client"].astype(np.int64),
        "class": r["class"].astype(np.int64),
        "cpu": np.full(n, -1, dtype=np.int32),
        "arrival": r["arrival"],
        "first_run": np.full(n, np.nan),
        "completion": r["completion"],
        "size": np.full(n, np.nan),
        "wait": np.full(n, np.nan),
        "response": r["completion"] - r["arrival"],
        "slowdown": np.full(n, np.nan),
        "context_switches": np.full(n, np.nan),
        "migrations": np.full(n, np.nan),
        "sent": r["sent"],
        "status": r["status"].astype(np.int64),
        "error": r["error"].astype(np.int64),
        "path": [targets[int(t)] for t in r["target"]],
        "bytes": r["bytes"].astype(float),
        "server_arrival": np.full(n, np.nan),
        "service": np.full(n, np.nan),
        "turns": np.full(n, -1, dtype=np.int64),
    })
    start_ns = raw["summary"]["start_ns"]
    if log is not None and len(log):
        log = log[log["request_id"] >= 0].drop_duplicates("request_id", keep="last")
        key = pd.DataFrame({"request_id": df["job"].astype(np.int64).to_numpy()})
        m = key.merge(log, how="left", on="request_id")
        have = m["status"].notna().to_numpy()
        served = have & (m["worker"].fillna(-1).to_numpy() >= 0)

        def col(name: str) -> np.ndarray:
            return m[name].to_numpy(dtype=float)

        def ms(name: str) -> np.ndarray:
            return (col(name) - start_ns) / 1e6

        first = ms("first_run_ns")
        first[col("first_run_ns") == 0] = np.nan
        df.loc[served, "cpu"] = col("worker")[served].astype(np.int32)
        df.loc[served, "first_run"] = first[served]
        df.loc[served, "wait"] = col("wait_ns")[served] / 1e6
        # When it entered the buffer (the master answered errors without: when it was read).
        admitted = np.where(col("admitted_ns") > 0, ms("admitted_ns"), ms("arrival_ns"))
        df.loc[have, "server_arrival"] = admitted[have]
        df.loc[served, "service"] = col("service_ns")[served] / 1e6
        df.loc[served, "context_switches"] = col("switches")[served]
        df.loc[served, "migrations"] = np.maximum(col("workers")[served] - 1, 0)
        df.loc[served, "turns"] = col("turns")[served].astype(np.int64)
        cls = col("class")
        use = served & (cls >= 0)
        df.loc[use, "class"] = cls[use].astype(np.int64)
        df.loc[served, "bytes"] = col("bytes")[served]
    if p is not None:
        # A job's size is its service in ms, as in every world: its file through the cost
        # model (NaN without an emulated cost).
        df["size"] = p.service_ms(df["bytes"].to_numpy())
        df["slowdown"] = df["response"] / df["size"]
    warm = np.asarray(r["warm"], dtype=bool) if "warm" in r else np.zeros(n, dtype=bool)
    if with_warmup:
        return df[JOB_COLUMNS + EXTRA_COLUMNS].assign(warm=warm)
    return df.loc[~warm, JOB_COLUMNS + EXTRA_COLUMNS].reset_index(drop=True)


def _entitled(p: Plan, ok: pd.DataFrame, clients: list[int], start: float,
              end: float) -> list[float]:
    """Entitled service per client: a client is runnable while its request is in the server
    (arrival to completion); the runnable clients share the workers by the policy's weight
    of their class (tickets, weight or nice, or 1), none above one worker."""
    index = {c: i for i, c in enumerate(clients)}
    tickets, weights = [], []
    for c in clients:
        cls = int(ok.loc[ok["client"] == c, "class"].iloc[0])
        conf = p.serve.get("classes", [{}])[cls] if p.serve.get("classes") else {}
        tickets.append(float(conf.get("tickets", 1.0)))
        # As the server schedules the class: its weight, or the weight of its nice value.
        weights.append(float(conf["weight"]) if "weight" in conf else
                       _core.nice_to_weight(conf["nice"]) if "nice" in conf else 1.0)
    shares = _core.policy_entitlements(p.policy, tickets, weights, p.params or None)
    rows = ok[ok["client"] >= 0]
    return _core.entitled_from_intervals(
        [index[int(c)] for c in rows["client"]], rows["arrival"].astype(float).tolist(),
        rows["completion"].astype(float).tolist(), shares, float(p.serve["cpus"]),
        (start, end))


def _summary(p: Plan, ok: pd.DataFrame, jobs: pd.DataFrame, s: dict[str, Any],
             stats: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """The common summary (`schedlab.results.summarize`) of the requests served, and the
    server world's own keys."""
    import numpy as np

    from schedlab.results import summarize

    workers = int(p.serve["cpus"])
    busy = [float(b) for b in stats.get("busy_ms", [])]
    duration = float(s["duration"])
    start = float(ok["arrival"].min()) if len(ok) else float("nan")
    end = float(ok["completion"].max()) if len(ok) else float("nan")
    span = end - start
    service = ok["size"].to_numpy(dtype=float)
    tasks: list[dict[str, Any]] = []
    if len(ok) and (ok["client"] >= 0).any():
        clients = sorted(int(c) for c in ok.loc[ok["client"] >= 0, "client"].unique())
        entitled = _entitled(p, ok, clients, start, end)
        for c, ent in zip(clients, entitled, strict=True):
            mine = ok[ok["client"] == c]
            cls = int(mine["class"].iloc[0])
            tasks.append({"task": c, "class": p.classes[cls] if p.classes else "0",
                          "service": float(mine["service"].sum()), "entitled": ent,
                          "migrations": float(mine["migrations"].sum()), "cpu": -1})
    counters = {
        "policy": p.policy, "seed": int(p.load["seed"]), "cpus": workers,
        "measure_start": start, "measure_end": end,
        "busy_per_cpu": busy, "busy_span": duration, "busy_time": float(sum(busy)),
        "work_served": float(np.nansum(service)) if np.isfinite(service).any() else np.nan,
        "overhead_time": np.nan,
        # The server has one queue (its buffer) for all workers: by Little's law its mean
        # number of requests present is the total time they spent in it over the span.
        "runnable_mean_per_cpu": [float(ok["response"].sum() / span)] if span > 0 else [np.nan],
        "offered_load": np.nan, "sim_time": duration, "warmup_jobs": int(s["warmup"]),
        "unfinished": int((~served(jobs)).sum()), "events": int(s["sent"]),
        "precision": p.load.get("precision"),
    }
    summary, classes, task_table = summarize(ok, tasks, p.classes or ["0"], counters)
    # p99.9, which the summary does not carry, as it makes p50-p99: over the same requests
    # in completion order, its interval by sectioning (the load generator's code).
    ordered = ok.sort_values("completion", kind="stable")["response"]
    (p999,), (p999_ci,) = _core.quantiles_with_intervals(
        np.ascontiguousarray(ordered.to_numpy(dtype=float)), [0.999])
    mean_service = float(np.mean(service)) if len(service) else float("nan")
    summary["offered_load"] = summary["arrival_rate"] * mean_service / workers
    summary.update({
        "world": "server", "missed_sends": int(s["missed_sends"]), "errors": int(s["errors"]),
        "errors_by_kind": s["errors_by_kind"], "status": s["status"], "bytes": int(s["bytes"]),
        # The summary's throughput of the requests measured (after every cut), per second.
        "duration": duration, "sending_ended": float(s["sending_ended"]),
        "throughput_rps": summary["throughput"] * 1e3,
        "throughput_rps_ci": [x * 1e3 for x in summary["throughput_ci"]],
        "offered_rate": s["offered_rate"],
        "response_p999": p999, "response_p999_ci": list(p999_ci),
        "connections": int(s["connections"]),
        "server_served": int(stats.get("served", 0)),
        "server_aborted": int(stats.get("aborted", 0)),
        "server_errors": stats.get("errors", {}), "server_drained": bool(stats.get("drained")),
        "cost": p.serve.get("cost", "none"), "cost_mode": p.serve.get("cost_mode", "sleep"),
        "hdr_log": s.get("hdr_log"),
    })
    return summary, classes, task_table


# ---------------------------------------------------------------------------------------------
# Commands: schedlab serve, schedlab load
# ---------------------------------------------------------------------------------------------


def _kv_arg(allowed: tuple[str, ...], texts: tuple[str, ...] = ("name", "prefix")) -> Any:
    def parse(text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for part in text.split():
            key, sep, value = part.partition("=")
            if not sep or key not in allowed:
                raise argparse.ArgumentTypeError(f"class field '{part}': expected key=value "
                                                 f"with key one of {', '.join(allowed)}")
            if key in texts:
                out[key] = value
            else:
                try:
                    out[key] = float(value)
                except ValueError:
                    raise argparse.ArgumentTypeError(
                        f"class field {key}={value}: expected a number") from None
                if key == "clients":
                    out[key] = int(out[key])
        return out
    return parse


def _duration_ms(text: str, bare: str = "s") -> float:
    """10s, 500ms, 2m or a bare number of `bare` units (seconds for --duration, like wrk; ms
    for --time, the world key's unit)."""
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(us|ms|s|m|h|)\s*",
                     text.lower())
    if not m or not float(m.group(1)) > 0:
        raise argparse.ArgumentTypeError(f"'{text}': expected a time > 0 such as 10s, 500ms "
                                         f"or 2m (a bare number is {bare})")
    return float(m.group(1)) * scale[m.group(2) or bare]


def _time_ms(text: str) -> float:
    return _duration_ms(text, bare="ms")


def add_commands(sub: Any) -> None:
    """Registers `schedlab serve` and `schedlab load` on a subparsers object."""
    p = sub.add_parser("serve", help="serve files with a policy-ordered request queue",
                       description="HTTP/1.1 file server: a master thread parses requests into "
                       "a bounded buffer ordered by a scheduling policy; N workers serve them. "
                       "Stops cleanly (drains) on Ctrl-C or SIGTERM.")
    p.add_argument("--config", help="JSON file with server keys (flags override)")
    p.add_argument("--root", help="directory to serve")
    p.add_argument("--host", help="address to listen on; default 127.0.0.1")
    p.add_argument("--port", type=int, help="TCP port (0: any free port); default 8080")
    p.add_argument("--cpus", "--workers", dest="cpus", type=int, metavar="N",
                   help="worker threads, the server's CPUs (the key cpus; --workers is its "
                   "former name); default 2")
    p.add_argument("--buffer", type=int, help="bounded buffer size; default 128")
    p.add_argument("--policy", help="scheduling policy (schedlab policies); default fcfs")
    p.add_argument("--packet", type=int, help="packet: bytes (default 65536) or lines (10)")
    p.add_argument("--packet-unit", choices=None, help="bytes or lines; default bytes")
    p.add_argument("--cost", help="emulated cost, e.g. 0.05ms+10us/KiB; default none")
    p.add_argument("--cost-mode", help="sleep or spin; default sleep")
    p.add_argument("--class", dest="classes", action="append",
                   type=_kv_arg(("name", "prefix", "priority", "tickets", "weight", "nice",
                                 "deadline")),
                   metavar="'name=N prefix=/P/ priority=P tickets=T'", help="a request class")
    p.add_argument("--max-connections", type=int, help="open connections at most; default 10000")
    p.add_argument("--header-timeout", type=float, help="ms to send a request head; default 10000")
    p.add_argument("--idle-timeout", type=float, help="ms a keep-alive connection may idle; "
                   "default 30000")
    p.add_argument("--send-timeout", type=float,
                   help="ms a response may go without its client taking any of it; default "
                   "30000")
    p.add_argument("--drain-timeout", type=float, help="ms to finish in-flight requests at "
                   "stop; default 30000")
    p.add_argument("--max-header", type=int, help="request head bytes at most; default 8192")
    p.add_argument("--server-log", "--log", dest="server_log", metavar="FILE",
                   help="CSV log, one row per request (--log is its former name)")
    p.add_argument("--stats", help="JSON stats written at exit")
    p.add_argument("--seed", type=int, help="seed of randomised policies")
    p.add_argument("--quiet", action="store_true", help="do not print where it listens")
    add_policy_param_flags(p, "policy parameters (see `schedlab policies`; work, such as a "
                           "quantum, counts packets)", work="packets")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("load", help="load generator: closed loop, open loop or a burst",
                       description="Sends HTTP GETs over keep-alive connections and measures "
                       "response times from the intended send time, summarized as every "
                       "world's are (means and quantiles with their 95% intervals).")
    p.add_argument("--url", required=True, help="http://HOST:PORT[/PATH]")
    p.add_argument("--clients", type=int, help="closed loop: clients")
    p.add_argument("--think", help="closed loop: think-time distribution in ms; default det:0")
    p.add_argument("--rate", type=float, help="open loop: requests per second")
    p.add_argument("--arrival", help="poisson|constant with --rate; or an inter-arrival "
                   "distribution in ms (exp:MEAN, ...)")
    p.add_argument("--burst", help="scripted burst, e.g. 5x/large.bin@0,10x/small.bin@50")
    p.add_argument("--mix", help="catalogue file: lines PATH [WEIGHT [CLASS]]")
    p.add_argument("--zipf", type=float, help="Zipf exponent over the catalogue order")
    p.add_argument("--class", dest="classes", action="append",
                   type=_kv_arg(("name", "fraction", "clients"), ("name",)),
                   metavar="'name=N fraction=F clients=C'", help="a request class")
    p.add_argument("--jobs", type=int, help="measured requests")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--time", type=_time_ms, metavar="MS", help="how long to send, in ms "
                      "(the key time) or with a unit: 500ms, 10s, 2m")
    when.add_argument("--duration", dest="time", type=_duration_ms,
                      help="how long to send, in s as wrk takes it (10 = 10s) or with a unit")
    p.add_argument("--warmup", type=int, help="requests left out of the results")
    p.add_argument("--precision", type=float, help="send until the mean response's 95%% "
                   "interval is this narrow (half-width over mean), looking first after --jobs; "
                   "--time caps the run")
    p.add_argument("--seed", type=int, help="random seed; default 1")
    p.add_argument("--threads", type=int, help="generator threads; default 1")
    p.add_argument("--connections", type=int, help="open loop: connections at most; "
                   "default 1000")
    p.add_argument("--timeout", type=float, help="ms before a request fails; default 30000")
    p.add_argument("--miss", type=float, help="ms of lateness that makes a send "
                   "missed; default 1")
    p.add_argument("--keep-alive", dest="keep_alive", action=argparse.BooleanOptionalAction,
                   default=None, help="clients reuse connections (the key keep_alive); "
                   "default yes")
    p.add_argument("--no-keepalive", dest="keep_alive", action="store_false", default=None,
                   help=argparse.SUPPRESS)  # its former name
    p.add_argument("--out", help="per-request table (.csv or .parquet)")
    p.add_argument("--hdr-log", help="HdrHistogram interval log file")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="live progress line; default when stderr is a terminal")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_load)


# The options of `schedlab serve` and `schedlab load` as `schedlab.serve` and `schedlab.load`
# take them: the keys of the core's specs, which are the experiment keys where a world has one
# (cpus, server_log, time, keep_alive, hdr_log, ...).
SERVE_OPTIONS = ("root", "host", "port", "cpus", "buffer", "policy", "packet", "packet_unit",
                 "cost", "cost_mode", "classes", "max_connections", "header_timeout",
                 "idle_timeout", "send_timeout", "drain_timeout", "max_header", "server_log",
                 "stats", "seed")
LOAD_OPTIONS = ("clients", "think", "rate", "arrival", "burst", "mix", "zipf", "classes", "jobs",
                "time", "warmup", "precision", "seed", "threads", "connections", "timeout",
                "miss", "keep_alive", "out", "hdr_log", "progress")
# Former names, still read: option -> (its name now, how its value becomes the new one's).
FORMER_LOAD_OPTIONS = {"duration": ("time", None), "no_keepalive": ("keep_alive", "negate")}
# The server's keys' former names, still read in a --config file (as the flags --workers and
# --log): former -> now.
FORMER_SERVE_KEYS = {"workers": "cpus", "log": "server_log"}


def serve_config(args: argparse.Namespace) -> dict[str, Any]:
    cfg: dict[str, Any] = {}
    if args.config:
        try:
            cfg = json.loads(Path(args.config).read_text())
        except (OSError, ValueError) as e:
            raise spec_error("config", args.config, f"a readable JSON file ({e})") from None
        if not isinstance(cfg, dict):
            raise spec_error("config", args.config, "a JSON object of serve keys ({\"root\": "
                             f"...}}), not a {type(cfg).__name__}")
        for former, key in FORMER_SERVE_KEYS.items():  # so that a flag overrides either
            if former in cfg:
                if key in cfg:
                    raise spec_error(former, cfg[former], f"one of {former} (the former name) "
                                     f"and {key}, not both")
                cfg[key] = cfg.pop(former)
    # A policy's parameters as `schedlab sim` gathers them: the file's (its params table,
    # numbers there, not text; inline in its policy), then the command line's (inline in
    # --policy, flags), one value each within either, the command line's over the file's.
    in_file, on_line = Params(), Params()
    file_params = cfg.get("params") or {}
    if not isinstance(file_params, dict):
        raise spec_error("params", file_params, "a table of the policy's parameters")
    in_file.give({k: param_value(f"params.{k}", v) for k, v in file_params.items()},
                 "--config's params")
    if isinstance(cfg.get("policy"), str):
        cfg["policy"] = _one_policy(cfg["policy"], in_file,
                                    f"--config's policy ({cfg['policy']})")
    for key in SERVE_OPTIONS:
        value = getattr(args, key, None)
        if value is not None:
            cfg[key] = value
    if args.quiet:
        cfg["announce"] = False
    if args.policy is not None:
        cfg["policy"] = _one_policy(args.policy, on_line, f"--policy {args.policy}")
    on_line.give(flag_params(args), "its flag")
    params = {**in_file.values, **on_line.values}
    if params:
        cfg["params"] = params
    return _checked_serve(cfg)


def _one_policy(text: str, params: Params, where: str) -> str:
    """The policy's name; its inline parameters (`rr:quantum=5`, `mlfq:quanta=1,2,4`) go to
    `params`. The server runs one policy: a list is refused."""
    if ":" not in text and "," not in text:
        return text
    parsed = parse_policies(text)
    if len(parsed) != 1:
        raise spec_error("policy", text, "one policy: the server runs one at a time (an "
                         "experiment file compares several)")
    ((name, inline),) = parsed
    params.give(inline, where)
    return name


def _checked_serve(cfg: dict[str, Any]) -> dict[str, Any]:
    """What the core cannot say well: a missing root, an output it could not write at the end,
    a port out of range (the core's u16 would only say 'invalid value')."""
    if "root" not in cfg:
        raise spec_error("root", "(missing)", "--root DIR, the directory to serve")
    for key in ("server_log", "stats"):  # written at the end: refused now, not after the run
        if isinstance(cfg.get(key), str):
            check_writable(key, cfg[key], ())
    port = cfg.get("port")
    if port is not None and not (isinstance(port, int) and not isinstance(port, bool)
                                 and 0 <= port <= 65535):
        raise spec_error("port", port, "a TCP port from 0 (any free port) to 65535")
    return cfg


def cmd_serve(args: argparse.Namespace) -> int:
    cfg = serve_config(args)
    _core.serve_validate(cfg)  # before any directory is made for its outputs
    made = [d for key in ("server_log", "stats")  # the core writes them
            if isinstance(cfg.get(key), str) for d in make_parent(cfg[key])]
    try:
        stats = _core.serve(cfg)
    except BaseException:  # a port in use: the log's directory goes with the server
        unmake(made)
        raise
    errors = sum(stats["errors"].values())
    print(f"schedlab serve: stopped ({'drained' if stats['drained'] else 'drain timed out'}); "
          f"served {stats['served']}, aborted {stats['aborted']}, dropped {stats['dropped']}, "
          f"errors {errors}, rejected {stats['rejected']}, connections {stats['connections']}",
          file=sys.stderr)
    return 0


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    cfg: dict[str, Any] = {"url": args.url}
    for key in LOAD_OPTIONS:
        value = getattr(args, key, None)
        if value is not None and key != "out":
            cfg[key] = value
    if args.out:
        check_writable("out", args.out)
    if args.hdr_log:
        check_writable("hdr_log", args.hdr_log, ())
    cfg["keep_requests"] = bool(args.out)
    return cfg


LOAD_ROWS = [("requests", "requests"), ("throughput_rps", "throughput (requests/s)"),
             ("response_mean", "response mean (ms)"), ("response_p50", "response p50 (ms)"),
             ("response_p90", "response p90 (ms)"), ("response_p99", "response p99 (ms)"),
             ("response_p999", "response p99.9 (ms)"), ("response_max", "response max (ms)"),
             ("errors", "errors"), ("missed_sends", "missed sends"), ("bytes", "bytes"),
             ("duration", "duration (ms)"), ("connections", "connections")]


def _check_reachable(url: str) -> None:
    """One connection before the run: a server that is not there is named at once instead of
    after a whole run of connect errors."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80),
                                      timeout=5):
            pass
    except OSError as e:
        raise spec_error("url", url, f"a server that accepts connections "
                         f"({e.strerror or e})") from None


def _run_load(args: argparse.Namespace) -> dict[str, Any]:
    """Checks, sends and measures; writes the per-request table to `args.out` if given.
    Returns the summary."""
    from schedlab.results import write_table

    cfg = load_config(args)
    _core.load_validate(cfg)
    _check_reachable(args.url)
    made = make_parent(cfg["hdr_log"]) if cfg.get("hdr_log") else []  # the core writes it
    try:
        raw = _core.load(cfg)
    except BaseException:
        unmake(made)
        raise
    if args.out:
        write_table(request_table(raw), args.out)
    return raw["summary"]


def load(url: str, **options: Any) -> dict[str, Any]:
    """`schedlab load` from Python, with the command's options by the same names
    (`LOAD_OPTIONS`; `time` in ms, or text with a unit as `--time` takes it). Returns the
    summary with its `units`, as `--json` prints it."""
    from schedlab.vocabulary import LOAD_SUMMARY_UNITS

    args = argparse.Namespace(url=url, **dict.fromkeys(LOAD_OPTIONS))
    for key, value in options.items():
        name, how = FORMER_LOAD_OPTIONS.get(key, (key, None))
        if name not in LOAD_OPTIONS:
            raise spec_error(key, value, f"an option of schedlab load ({', '.join(LOAD_OPTIONS)})")
        if name != key and name in options:
            raise spec_error(key, value, f"one of {key} (the former name) and {name}, not both")
        setattr(args, name, (not value) if how == "negate" else value)
    if isinstance(args.time, str):
        key = "duration" if "duration" in options else "time"
        try:
            args.time = _duration_ms(args.time, bare="s" if key == "duration" else "ms")
        except argparse.ArgumentTypeError:
            raise spec_error(key, args.time, "a time > 0 such as 10s, 500ms or 2m, or a number "
                             "of ms") from None
    args.progress = bool(args.progress)
    s = _run_load(args)
    return {**s, "units": {k: LOAD_SUMMARY_UNITS[k] for k in s if k in LOAD_SUMMARY_UNITS}}


class Server:
    """A running `schedlab serve`, from `schedlab.serve`: a child process listening at `url`.
    `stop()` drains it (SIGTERM, as Ctrl-C does) and returns its stats (what `--stats`
    writes); as a context manager it stops on leaving the block."""

    def __init__(self, config: dict[str, Any], timeout: float):
        self._work = tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-")
        self._stats_path = Path(config.get("stats") or Path(self._work.name) / "stats.json")
        self._drain_s = float(config.get("drain_timeout", 30_000)) / 1e3 + 15
        try:
            self._process = ServerProcess({**config, "stats": str(self._stats_path),
                                           "announce": True}, Path(self._work.name), timeout)
        except BaseException:
            self._work.cleanup()
            raise
        self.url: str = self._process.url
        self.stats: dict[str, Any] | None = None
        self._failure: BaseException | None = None

    def stop(self) -> dict[str, Any]:
        if self._failure is not None:  # stopped before, and it failed: the same error
            raise self._failure
        if self.stats is None:
            try:
                code = self._process.stop(self._drain_s)
                if code != 0:
                    raise RuntimeError(f"schedlab serve exited ({code}): {self._process._err()}")
                self.stats = json.loads(self._stats_path.read_text())
            except BaseException as e:
                self._failure = e
                raise
            finally:
                self._work.cleanup()
        return self.stats

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.stats is not None else "running"
        return f"<schedlab.Server {self.url} {state}>"


def serve(root: str | os.PathLike[str], timeout: float = 30.0, **options: Any) -> Server:
    """`schedlab serve` from Python, with the command's options by the same names
    (`SERVE_OPTIONS`; a policy's parameters by theirs, or `params`): starts the server and
    returns once it listens. `timeout`: seconds to wait for it. Bad input is refused before
    anything starts (a SpecError naming the key)."""
    from schedlab.vocabulary import Params, param_units, quoted

    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise spec_error("timeout", quoted(timeout), "seconds > 0 to wait for the server")
    cfg: dict[str, Any] = {"root": str(root)}
    params = Params()
    table = options.pop("params", None)
    if table is not None:
        if not isinstance(table, dict):
            raise spec_error("params", table, "a table of the policy's parameters")
        params.give(table, "params")
    policy = params.of_policy(options.pop("policy", None))  # RR(quantum=2), rr:quantum=2
    if policy is not None:
        cfg["policy"] = policy
    names = param_units()
    for key, value in options.items():
        if value is None:
            continue  # as a flag not given
        if key in SERVE_OPTIONS and key != "root":
            cfg[key] = value
        elif key in names:
            params.give({key: value}, "its own key")
        else:
            raise spec_error(key, value, "an option of schedlab serve "
                             f"({', '.join(SERVE_OPTIONS[1:])}) or a policy parameter")
    if params.values:
        cfg["params"] = {k: param_value(k, v) for k, v in params.values.items()}
    _core.serve_validate(_checked_serve(cfg))
    return Server(cfg, timeout)


def cmd_load(args: argparse.Namespace) -> int:
    from schedlab.jsonio import dumps

    s = _run_load(args)
    # Every request failed (the server went away): the run measured nothing.
    failed = s["requests"] == 0 and sum(s["errors_by_kind"].values()) > 0
    if failed:
        print(f"schedlab: error: no request to {args.url} succeeded: " +
              ", ".join(f"{k} {v}" for k, v in s["errors_by_kind"].items()), file=sys.stderr)
    if args.json:
        from schedlab.vocabulary import LOAD_SUMMARY_UNITS

        print(dumps({**s, "units": {k: LOAD_SUMMARY_UNITS[k] for k in s
                                    if k in LOAD_SUMMARY_UNITS}}))
        return 1 if failed else 0
    from rich.console import Console
    from rich.table import Table

    from schedlab.summary_rows import UNTRUSTED_MARK, interval_of, interval_text, not_success

    table = Table(title=f"schedlab load: {s['mode']} loop, {args.url}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% interval", justify="right")
    mark = "" if s.get("ci_uncorrelated", True) else UNTRUSTED_MARK
    for key, label in LOAD_ROWS:
        v = s.get(key)
        if isinstance(v, float) and not math.isfinite(v):
            continue
        ci = interval_of(s, key)
        table.add_row(label, f"{v:,.4g}" if isinstance(v, float) else f"{v:,}",
                      interval_text(ci) + (mark if ci is not None else ""))
    console = Console()
    console.print(table)
    if mark and s["requests"]:
        console.print(f"{UNTRUSTED_MARK} too few requests to show the batches behind the "
                      "intervals uncorrelated: not to be trusted")
    if s.get("precision") is not None:
        got = s.get("response_mean_precision")
        got_text = f"{got:.2%}" if isinstance(got, float) and math.isfinite(got) else "unknown"
        if s.get("precision_reached"):
            console.print(f"precision {s['precision']:g} reached: the mean response's 95% "
                          f"interval is ±{got_text} of it (in completion order)")
        else:
            console.print(f"WARNING: precision {s['precision']:g} not reached ({got_text} at "
                          "the cap); raise --time", style="bold red")
    if s["errors_by_kind"]:
        print("errors: " + ", ".join(f"{k} {v}" for k, v in s["errors_by_kind"].items()))
    if refused := not_success(s):  # a 404 is an answer, timed as one by a load generator
        console.print(f"WARNING: {refused}; their times are in the numbers above",
                      style="bold red")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m schedlab.server serve|load ...` (what run() starts as the server)."""
    die_with_parent()  # started by run(): it dies with its parent
    parser = Parser(prog="schedlab")
    add_commands(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
