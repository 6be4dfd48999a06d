# SPDX-License-Identifier: Apache-2.0
"""benchmarks/results_table.py: the committed benchmarks/results/README.md is the one the script
writes from the committed JSON, and its check catches a stale README, a superseded run and a
result outside the layout."""
import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "results_table.py"
RESULTS = ROOT / "benchmarks" / "results"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_committed_readme_is_generated():
    r = run("--check")
    assert r.returncode == 0, r.stderr


def small_copy(tmp_path):
    """Two benchmarks of the committed results, with their README written."""
    root = tmp_path / "results"
    for bench in ("sample-cpu-t1", "gather-cpu"):
        shutil.copytree(RESULTS / bench, root / bench)
    r = run("--results", root)
    assert r.returncode == 0, r.stderr
    r = run("--check", "--results", root)
    assert r.returncode == 0, r.stderr
    return root


def test_check_fails_on_a_stale_readme(tmp_path):
    root = small_copy(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("| 4096 |", "| 4097 |", 1))
    r = run("--check", "--results", root)
    assert r.returncode == 1
    assert "out of date" in r.stderr and "4097" in r.stderr


def test_check_fails_on_a_superseded_run(tmp_path):
    root = small_copy(tmp_path)
    current = sorted((root / "gather-cpu").glob("*.json"))[-1]
    shutil.copy(current, root / "gather-cpu" / ("2000-01-01-abcdef1-" + current.name[19:]))
    r = run("--check", "--results", root)
    assert r.returncode == 1
    assert "2000-01-01-abcdef1" in r.stderr and "superseded" in r.stderr


def test_check_fails_on_a_flat_or_misnamed_result(tmp_path):
    root = small_copy(tmp_path)
    shutil.copy(sorted((root / "gather-cpu").glob("*.json"))[-1], root / "gather_cpu_s3.json")
    (root / "gather-cpu" / "latest.json").write_text("{}")
    r = run("--check", "--results", root)
    assert r.returncode == 1
    assert "gather_cpu_s3.json: results go in a folder" in r.stderr
    assert "gather-cpu/latest.json: not named" in r.stderr


def test_every_benchmark_needs_a_table(tmp_path):
    root = small_copy(tmp_path)
    shutil.copytree(root / "gather-cpu", root / "newbench")
    r = run("--check", "--results", root)
    assert r.returncode == 1
    assert "newbench: no table" in r.stderr


def test_a_run_of_an_older_harness_is_listed_apart(tmp_path):
    # A sample-cpu result without the fields the current harness writes (here its single
    # rounds) is not a current figure: it leaves the table for the Older harness listing, with
    # a note on stderr, and the check still passes (the README says so).
    root = small_copy(tmp_path)
    src = sorted((root / "sample-cpu-t1").glob("*.json"))[-1]
    d = json.loads(src.read_text())
    del d["reference"]["round_ratios"]
    old = root / "sample-cpu-t1-old" / "2000-01-01-abcdef1-vm.json"
    old.parent.mkdir()
    old.write_text(json.dumps(d))
    r = run("--results", root)
    assert r.returncode == 0, r.stderr
    assert "sample-cpu-t1-old/2000-01-01-abcdef1-vm: made by an older harness" in r.stderr
    text = (root / "README.md").read_text()
    table, older = text.split("**Older harness.**")
    assert "2000-01-01-abcdef1" not in table
    assert "| `sample-cpu-t1-old` | `reference.round_ratios` |" in older
    assert run("--check", "--results", root).returncode == 0


def test_deepgcn_rows_print_no_null_or_raw_float(tmp_path):
    # A run that never reached the target records null epochs to it: "not reached", not
    # "None"; the lr scaled by sqrt(ranks) is printed to 4 significant digits.
    root = tmp_path / "results"
    shutil.copytree(RESULTS / "deepgcn", root / "deepgcn")
    summary = sorted(p for p in (root / "deepgcn").glob("*.json") if p.name.count(".") == 1)[0]
    d = json.loads(summary.read_text())
    d["runs"][-1].update(epochs_to_target=None, seconds_to_target=None, lr=0.01 * 2 ** 0.5)
    summary.write_text(json.dumps(d))
    assert run("--results", root).returncode == 0
    text = (root / "README.md").read_text()
    assert "None" not in text and "0.014142" not in text
    assert "| not reached | – |" in text and "| 0.01414 |" in text
