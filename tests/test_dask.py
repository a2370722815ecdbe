"""`--dask ADDRESS`: the same tasks on a Dask cluster give the same results as the local pool."""

from __future__ import annotations

import subprocess

import pytest
import schedlab
from conftest import SCHEDLAB, cli_env

distributed = pytest.importorskip("distributed")

EXPERIMENT = {
    "experiment": {"name": "dask", "replications": 3, "seed": 5, "keep_jobs": "first"},
    "workload": {"size": "exp:1", "jobs": 20_000},
    "policy": [{"name": "fcfs"}, {"name": "srpt"}, {"name": "rr", "quantum": 0.5}],
    "sweep": {"workload.load": [0.5, 0.8]},
}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as c:
        yield c


def test_local_cluster_gives_the_same_summaries_as_the_pool(cluster, tmp_path):
    local = schedlab.run(EXPERIMENT, out=tmp_path / "local", workers=2)
    remote = schedlab.run(EXPERIMENT, out=tmp_path / "dask", dask=cluster.scheduler_address)
    for name in ("summaries.parquet", "stats.parquet", "classes.parquet"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "dask" / name).read_bytes()
    assert len(remote.summaries) == 2 * 3 * 3
    # Both Dask workers took part (each run records the process that ran it).
    assert remote.timing["worker"].nunique() == 2
    assert set(remote.timing["worker"]).isdisjoint(set(local.timing["worker"]))
    # SRPT beats FCFS at load 0.8 (M/M/1: FCFS 5.0, SRPT 2.9 by Schrage-Miller).
    m = remote.metric("response_mean").set_index(["point", "label"])["mean"]
    assert m[(1, "SRPT")] < m[(1, "FCFS")]
    assert m[(1, "FCFS")] == pytest.approx(5.0, rel=0.15)


def test_cli_dask_flag_and_bad_address(cluster, tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('[experiment]\nname = "d"\n[workload]\nload = 0.5\njobs = 500\n'
                    '[[policy]]\nname = "fcfs"\n')
    out = tmp_path / "o"
    r = subprocess.run([SCHEDLAB, "run", str(path), "--out", str(out), "--dask",
                        cluster.scheduler_address], capture_output=True, text=True,
                       env=cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert schedlab.load_results(out).summaries["jobs"].tolist() == [500]
    r = subprocess.run([SCHEDLAB, "run", str(path), "--out", str(tmp_path / "x"), "--dask",
                        "nowhere://scheduler"], capture_output=True, text=True, env=cli_env(),
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert "dask = nowhere://scheduler: expected the address of a reachable Dask scheduler" \
        in r.stderr.strip().splitlines()[-1]
