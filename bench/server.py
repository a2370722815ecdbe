"""The file server against nginx, and the load generator's send rate (issue 5).

1. `schedlab serve` (FCFS, 2 workers, no emulated cost) and nginx (2 worker processes,
   sendfile on, access log off), both started here on free ports of 127.0.0.1 from a temp dir,
   driven by wrk (`-t2 -c64`) for `--duration` seconds, on a 1 KiB and a 100 KiB file.
   Repetitions are interleaved (nginx then schedlab, then the other way round), so noise from
   other work on the machine spreads over both; the ratio schedlab/nginx is taken within each
   repetition and the median reported against the target (70%). Issue 15's check (no
   throughput lost to parking responses off the workers) is the same comparison under
   `--threads 1 --connections 32 --sizes 1k,100k,1m --reps 3 --target 1.0 --skip-load`.
2. The load generator (`schedlab load`, one thread, closed loop with 64 connections) pinned to
   one CPU against nginx pinned to the other, for the 1 KiB file and for nginx's cheapest answer
   (`location = /empty { return 204; }`, so that nginx on one core limits as little as it
   can); beside it wrk with one thread pinned the same way, as the reference for what that
   nginx can answer. Target: 50,000 requests/s. Each tool's requests per CPU-second of its own
   (getrusage) show its cost per request whatever limits the rate.

    .venv/bin/python server.py [--reps 5] [--duration 5] [--out out/server.json]
        [--threads 2] [--connections 64] [--sizes 1k,100k] [--target 0.70] [--skip-load]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = {"1k": 1024, "100k": 100 * 1024, "1m": 1024 * 1024}
SERVE_TARGET = 0.70
LOAD_TARGET = 50_000

NGINX_CONF = """
worker_processes 2;
{affinity}
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
daemon off;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  {extra}
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  server {{ listen 127.0.0.1:{port} reuseport; root {root}; location = /empty {{ return 204; }} }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def nginx_binary() -> str:
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    sys.exit("nginx not found (make setup installs nginx-light)")


def start_nginx(root: Path, tmp: Path, pin: str | None,
                extra: str = "") -> tuple[subprocess.Popen, int]:
    port = free_port()
    d = tmp / f"nginx-{port}"
    d.mkdir()
    affinity = f"worker_cpu_affinity {pin} {pin};" if pin else ""
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=d, port=port, root=root, affinity=affinity,
                                      extra=extra))
    p = subprocess.Popen([nginx_binary(), "-c", str(conf), "-p", str(d)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_port(port)
    return p, port


def start_schedlab(root: Path) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([sys.executable, "-m", "schedlab.server", "serve", "--root", str(root),
                          "--port", "0", "--cpus", "2", "--policy", "fcfs"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        raise RuntimeError(f"schedlab serve did not start: {line!r} {p.stderr.read()!r}")
    return p, int(m.group(1))


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wrk(url: str, duration: float, threads: int, conns: int,
        cpu: int | None = None) -> tuple[float, float]:
    """Requests per second, and requests per CPU-second of wrk itself."""
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration:g}s", url]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60,
                         preexec_fn=(lambda: os.sched_setaffinity(0, {cpu}))
                         if cpu is not None else None).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    if m is None or "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk failed or saw errors: {' '.join(cmd)}\n{out}")
    total = float(re.search(r"(\d+) requests in", out).group(1))
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(m.group(1)), total / cpu_s if cpu_s > 0 else float("nan")


def schedlab_load(url: str, duration: float, clients: int, cpu: int) -> dict:
    """The summary of `schedlab load` in a pinned child, plus its CPU time (the load alone,
    without the interpreter's start)."""
    code = ("import json, os, resource, sys; os.sched_setaffinity(0, {int(sys.argv[2])}); "
            "from schedlab import _core; r0 = resource.getrusage(resource.RUSAGE_SELF); "
            "s = _core.load({'url': sys.argv[1], 'clients': int(sys.argv[3]), "
            "'time': float(sys.argv[4]), 'keep_requests': False, 'progress': False}); "
            "r1 = resource.getrusage(resource.RUSAGE_SELF); "
            "s['summary']['cpu_s'] = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime; "
            "print(json.dumps(s['summary']))")
    out = subprocess.run([sys.executable, "-c", code, url, str(cpu), str(clients),
                          str(duration * 1e3)], capture_output=True, text=True,
                         timeout=duration + 60, check=True).stdout
    s = json.loads(out)
    if s["errors"]:
        raise RuntimeError(f"schedlab load saw errors: {s['errors_by_kind']}")
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    ap.add_argument("--connections", type=int, default=64, help="wrk's -c")
    ap.add_argument("--threads", type=int, default=2, help="wrk's -t")
    ap.add_argument("--sizes", default="1k,100k", help=f"files among {', '.join(SIZES)}")
    ap.add_argument("--target", type=float, default=SERVE_TARGET,
                    help="schedlab/nginx ratio to reach")
    ap.add_argument("--skip-load", action="store_true",
                    help="only schedlab serve against nginx, not the load generator")
    ap.add_argument("--out", default=str(HERE / "out" / "server.json"))
    ap.add_argument("--open-file-cache", action="store_true",
                    help="give nginx open_file_cache (it then skips open/fstat/close per request)")
    args = ap.parse_args()
    sizes = {name: SIZES[name] for name in args.sizes.split(",")}
    if shutil.which("wrk") is None:
        sys.exit("wrk not found (make setup installs it)")
    ncpu = len(os.sched_getaffinity(0))
    results: dict = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"nproc": ncpu, "platform": platform.platform(),
                    "cpu": _cpu_model(), "python": platform.python_version(),
                    "nginx": _version([nginx_binary(), "-v"]), "wrk": _version(["wrk", "-v"])},
        "args": vars(args), "serve": {}, "load": {},
    }
    with tempfile.TemporaryDirectory(prefix="schedlab-bench-") as t:
        tmp = Path(t)
        root = tmp / "root"
        root.mkdir()
        for name, size in sizes.items():
            (root / f"{name}.bin").write_bytes(os.urandom(size))
            (root / f"{name}.bin").chmod(0o644)
        # nginx's workers run as an unprivileged user: they must be able to read the files.
        tmp.chmod(0o755)
        root.chmod(0o755)

        # 1. schedlab serve against nginx under wrk.
        extra = "open_file_cache max=1000 inactive=60s;" if args.open_file_cache else ""
        ng, ng_port = start_nginx(root, tmp, None, extra)
        try:
            sl, sl_port = start_schedlab(root)
        except BaseException:
            stop(ng)
            raise
        try:
            for name in sizes:
                runs = []
                for rep in range(args.reps):
                    order = [("nginx", ng_port), ("schedlab", sl_port)]
                    if rep % 2:
                        order.reverse()
                    row = {"loadavg_before": loadavg()}
                    for who, port in order:
                        row[who] = wrk(f"http://127.0.0.1:{port}/{name}.bin", args.duration,
                                       args.threads, args.connections)[0]
                    row["ratio"] = row["schedlab"] / row["nginx"]
                    runs.append(row)
                    print(f"{name:>5} rep {rep + 1}: nginx {row['nginx']:>9,.0f}  schedlab "
                          f"{row['schedlab']:>9,.0f} req/s  ratio {row['ratio']:.2f}  "
                          f"(load avg {row['loadavg_before']:.1f})", flush=True)
                results["serve"][name] = _medians(runs, ("nginx", "schedlab", "ratio"))
        finally:
            stop(sl)
            stop(ng)

        # 2. The load generator on one CPU against nginx on the other.
        if ncpu >= 2 and not args.skip_load:
            cpus = sorted(os.sched_getaffinity(0))
            gen_cpu, srv_cpu = cpus[-1], cpus[0]
            mask = format(1 << srv_cpu, "b")
            ng, ng_port = start_nginx(root, tmp, mask)
            try:
                for target in ("1k.bin", "empty"):
                    url = f"http://127.0.0.1:{ng_port}/{target}"
                    runs = []
                    for rep in range(args.reps):
                        row = {"loadavg_before": loadavg()}
                        order = ["schedlab", "wrk"] if rep % 2 == 0 else ["wrk", "schedlab"]
                        for who in order:
                            if who == "wrk":
                                row["wrk"], row["wrk_per_cpu_s"] = wrk(
                                    url, args.duration, 1, args.connections, gen_cpu)
                            else:
                                s = schedlab_load(url, args.duration, args.connections, gen_cpu)
                                row["schedlab"] = s["throughput_rps"]
                                row["schedlab_per_cpu_s"] = s["requests"] / s["cpu_s"]
                        row["ratio"] = row["schedlab"] / row["wrk"]
                        runs.append(row)
                        print(f"load {target} rep {rep + 1}: schedlab load "
                              f"{row['schedlab']:>9,.0f} req/s ({row['schedlab_per_cpu_s']:,.0f}"
                              f" per CPU-s)  wrk {row['wrk']:>9,.0f} req/s "
                              f"({row['wrk_per_cpu_s']:,.0f} per CPU-s)  ratio "
                              f"{row['ratio']:.2f}  (load avg {row['loadavg_before']:.1f})",
                              flush=True)
                    results["load"][target] = _medians(
                        runs, ("schedlab", "wrk", "ratio", "schedlab_per_cpu_s", "wrk_per_cpu_s"))
                results["load_cpus"] = {"generator": gen_cpu, "nginx": srv_cpu}
            finally:
                stop(ng)

    print()
    for name, r in results["serve"].items():
        verdict = "PASS" if r["ratio"] >= args.target else "FAIL"
        print(f"serve {name}: schedlab/nginx median {r['ratio']:.2f} (target {args.target:.2f}) "
              f"{verdict}; nginx {r['nginx']:,.0f}, schedlab {r['schedlab']:,.0f} req/s")
    for target, r in results["load"].items():
        verdict = "PASS" if r["schedlab"] >= LOAD_TARGET else "FAIL"
        print(f"load {target}: schedlab load median {r['schedlab']:,.0f} req/s on one core "
              f"(target {LOAD_TARGET:,}) {verdict}; {r['schedlab_per_cpu_s']:,.0f} requests per "
              f"CPU-second; wrk -t1 on the same core {r['wrk']:,.0f} req/s "
              f"({r['wrk_per_cpu_s']:,.0f} per CPU-second), ratio {r['ratio']:.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


def _medians(runs: list[dict], keys: tuple[str, ...]) -> dict:
    out = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["runs"] = runs
    return out


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _version(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (p.stdout + p.stderr).strip().splitlines()[0] if (p.stdout + p.stderr) else "?"


if __name__ == "__main__":
    main()
