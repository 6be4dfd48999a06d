# SPDX-License-Identifier: Apache-2.0
"""benchmarks/load_partition.py: a partition's load time next to its file reads, per repeat."""
import json
import os
import subprocess
import sys

from conftest import REPO, tessera

# The tessera this suite imports (installed, or a source tree with its built module).
PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


def test_load_partition_bench_reports_load_and_file_reads(cora_one, tmp_path):
    out = tmp_path / "load-partition"
    env = dict(os.environ, TESSERA_COMMIT="abc1234",
               PYTHONPATH=os.pathsep.join([PKG_ROOT, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "load_partition.py"),
                        cora_one, "--repeat", "2", "--machine-name", "test", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    (res,) = [json.loads(f.read_text()) for f in out.glob("*-abc1234-test.json")]
    assert res["graph"] == "cora" and res["num_nodes"] == 2708 and len(res["runs"]) == 2
    for r in res["runs"]:
        assert r["load_seconds"] > 0 and r["files_seconds"] > 0
    assert res["ratio_load_vs_files"] == res["load_median_seconds"] / res["files_median_seconds"]


def test_load_partition_bench_names_a_missing_config(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "load_partition.py"),
                        str(tmp_path / "none.json")], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "none.json: no such partition config" in p.stderr
