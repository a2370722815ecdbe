"""The package's shape and its one vocabulary: no import cycles, each world a module with a
table that reads every key of the vocabulary exactly once, no policy parameter named like a
key, one unit per name."""

from __future__ import annotations

import ast
import json
import subprocess

import pytest
from conftest import BIN, ROOT
from schedlab import _core, vocabulary, worlds
from schedlab.worlds import Maps, Native
from schedlab.worlds import os as os_world
from schedlab.worlds import server as server_world
from schedlab.worlds import sim as sim_world

WORLD_MODULES = {"sim": sim_world, "server": server_world, "os": os_world}


def test_import_contracts_hold():
    # pyproject.toml: no cycles, layers, and no world importing another (lazy imports count).
    r = subprocess.run([str(BIN / "lint-imports"), "--config", str(ROOT / "pyproject.toml"),
                        "--no-cache"], cwd=ROOT / "python", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in r.stdout


def test_modules_take_only_submodules_and_the_core_from_the_root_package():
    # The import contracts leave imports of the root package out (the compiled `_core` is not
    # in their graph); this keeps that honest: nothing else is taken from the root, which
    # re-exports the API and would hide a cycle.
    package = ROOT / "python" / "schedlab"
    submodules = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir()
                                                           if p.is_dir()} | {"_core"}
    for path in package.rglob("*.py"):
        if path.name == "__init__.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "schedlab":
                for alias in node.names:
                    assert alias.name in submodules, (path, alias.name)


@pytest.mark.parametrize("world", sorted(WORLD_MODULES))
def test_each_world_reads_every_key_of_the_vocabulary_in_its_table(world):
    mod = WORLD_MODULES[world]
    assert set(mod.KEYS) == set(vocabulary.KEYS), set(mod.KEYS) ^ set(vocabulary.KEYS)
    assert set(mod.CLASS_KEYS) == set(vocabulary.CLASS_KEYS), \
        set(mod.CLASS_KEYS) ^ set(vocabulary.CLASS_KEYS)
    # What the table calls native is what the world's code reads; a mapped key may stay
    # (its value rewritten) or go, but a dropped or refused key never reaches the world.
    for table, native in ((mod.KEYS, mod.NATIVE_KEYS), (mod.CLASS_KEYS, mod.NATIVE_CLASS_KEYS)):
        declared = {k for k, t in table.items() if isinstance(t, Native)}
        assert declared <= native, declared - native
        assert native <= {k for k, t in table.items() if isinstance(t, Native | Maps)}


def test_no_policy_parameter_has_the_name_of_a_key_and_each_name_has_one_unit():
    # The core refuses to compile a colliding catalogue; this fails too if one ever gets in.
    units: dict[str, str] = {}
    for p in vocabulary.policy_catalog():
        for q in p["params"]:
            assert q["name"] not in vocabulary.KEYS, (p["name"], q["name"])
            assert units.setdefault(q["name"], q["unit"]) == q["unit"], (p["name"], q["name"])
            assert q["unit"] in ("work", "time", "rate", "count", "bool", "ratio")
    # Service is work, converted per world; a period of wall-clock time is not.
    assert units["quantum"] == units["slice"] == units["slices"] == "work"
    assert units["boost_period"] == "time" and units["aging"] == "rate"


def test_the_simulators_keys_are_the_vocabularys():
    assert set(_core.SIM_KEYS) <= set(vocabulary.KEYS)
    assert set(_core.SIM_CLASS_KEYS) <= set(vocabulary.CLASS_KEYS)


def test_the_world_registry_lists_each_world_module():
    for world, mod in WORLD_MODULES.items():
        assert worlds.module(world) is mod
        assert callable(mod.run) and callable(mod.validate)


def _fresh_python(code: str) -> str:
    """What `code` prints in a new interpreter of the project's venv (nothing imported yet)."""
    r = subprocess.run([str(BIN / "python"), "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_command_line_starts_without_pandas_scipy_or_matplotlib():
    import schedlab

    # Issue 12: `schedlab --help` and the parser of every command import none of the heavy
    # libraries (their cost is measured in bench/startup.py); the API still reaches them on
    # first use, by the same names.
    probe = ("import sys, schedlab, schedlab.cli; schedlab.cli.make_parser(); "
             "heavy = ('pandas', 'scipy', 'matplotlib', 'pyarrow', 'distributed', 'pydantic', "
             "'numpy'); "
             "print(','.join(m for m in heavy if m in sys.modules)); "
             "r = schedlab.simulate(policy='fcfs', load=0.5, jobs=200); "
             "print(type(r).__name__, type(r) is schedlab.Result, "
             "round(schedlab.theory.mean_response('fcfs', 'exp:2', 'exp:1'), 6), "
             "issubclass(schedlab.SpecError, ValueError), 'pandas' in sys.modules)")
    loaded, api = _fresh_python(probe).splitlines()
    assert loaded == "", loaded
    # M/M/1 at load 0.5, mean size 1: E[T] = 1 / (1 - 0.5) = 2.
    assert api == "Result True 2.0 True True"
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        getattr(schedlab, "simulat")  # noqa: B009
    # `schedlab sim --json` prints the core's summary: no table, so no pandas, nor numpy
    # (~80 ms of a 0.2 s start here: it came with the server's module, which builds the
    # parser of serve and load).
    probe = ("import sys, json, contextlib, io\nfrom schedlab.cli import main\n"
             "buf = io.StringIO()\n"
             "with contextlib.redirect_stdout(buf): main(['sim', '--load', '0.5', '--jobs', "
             "'1000', '--json'])\n"
             "print(json.loads(buf.getvalue())['jobs'], 'pandas' in sys.modules, "
             "'numpy' in sys.modules)")
    assert _fresh_python(probe).split() == ["1000", "False", "False"]
    # Nor with replications: their summary is made from the runs' summaries alone, and is the
    # API's (which builds every run's tables) to the last bit, each run's summary too.
    probe = ("import sys, json, contextlib, io\nfrom schedlab.cli import main\n"
             "buf = io.StringIO()\n"
             "with contextlib.redirect_stdout(buf): main(['sim', '--load', '0.8', '--jobs', "
             "'2000', '--replications', '3', '--json'])\n"
             "pandas = 'pandas' in sys.modules\n"
             "import schedlab\nfrom schedlab.jsonio import dumps\n"
             "r = schedlab.simulate(load=0.8, jobs=2000, replications=3)\n"
             "print(json.dumps({'pandas': pandas, 'cli': json.loads(buf.getvalue()), 'api': "
             "json.loads(dumps({'summary': r.summary, 'runs': [x.summary for x in r.runs]}))}))")
    out = json.loads(_fresh_python(probe))
    assert out["pandas"] is False
    cli, api = out["cli"], out["api"]
    assert cli.pop("runs") == api["runs"] and len(api["runs"]) == 3
    units = cli.pop("units")
    assert set(units) <= set(api["summary"]) and units["response_mean_ci"] == "ms"
    assert cli == api["summary"] and cli["replications"] == 3 and cli["jobs"] == 6000
    assert cli["response_mean_ci"][0] < cli["response_mean"] < cli["response_mean_ci"][1]
    # Nor its table view, per-class table included; each class's row is the API's (the same
    # run, which does build the tables with pandas), to the table's 4 significant digits.
    classes = ("[{'name': 'a', 'fraction': 0.5}, {'name': 'b', 'fraction': 0.5, "
               "'size': 'exp:3'}]")
    probe = ("import sys, json, contextlib, io\nfrom schedlab.cli import main\n"
             "argv = ['sim', '--load', '0.5', '--jobs', '1000', '--class', 'name=a fraction=0.5', "
             "'--class', 'name=b fraction=0.5 size=exp:3']\n"
             "buf = io.StringIO()\n"
             "with contextlib.redirect_stdout(buf): main(argv)\n"
             "pandas = 'pandas' in sys.modules\n"
             "import schedlab\n"
             f"r = schedlab.simulate(load=0.5, jobs=1000, classes={classes})\n"
             "print(json.dumps({'pandas': pandas, 'text': buf.getvalue(), 'api': [[c['class'], "
             "str(int(c['jobs'])), f\"{c['response_mean']:.4g}\", "
             "'[%.4g, %.4g]' % tuple(c['response_mean_ci']) + "
             "('' if c['ci_uncorrelated'] else '\u2020')] for _, c in r.classes.iterrows()]}))")
    out = json.loads(_fresh_python(probe))
    assert out["pandas"] is False
    shown, name = {}, None
    for line in out["text"].split("by class", 1)[1].splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 5:
            name = cells[0] or name
            shown[name, cells[1]] = cells[2:4]
    got = [[n, shown[n, "jobs"][0], *shown[n, "response mean"]] for n in ("a", "b")]
    assert got == out["api"], out["text"]
