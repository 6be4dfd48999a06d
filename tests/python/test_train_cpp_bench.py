# SPDX-License-Identifier: Apache-2.0
"""benchmarks/train_cpp_vs_python.py without training: it alternates which trainer runs first
from repeat to repeat, and names a dirty run's result file as the results layout says."""
import importlib.util
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "train_cpp_vs_python.py"


def bench():
    spec = importlib.util.spec_from_file_location("train_cpp_vs_python", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_dirty_run_is_named_dirty():
    mod = bench()
    layout = re.compile(r"^\d{4}-\d{2}-\d{2}-[0-9a-f]{7,40}(-dirty)?-[A-Za-z0-9-]+\.json$")
    name = mod.result_name("2026-11-26", "bab9d3d+dirty", "NVIDIA-H200")
    assert name == "2026-11-26-bab9d3d-dirty-NVIDIA-H200.json" and layout.match(name)
    assert mod.result_name("2026-11-26", "bab9d3d", "cpu-2core") == \
        "2026-11-26-bab9d3d-cpu-2core.json"


def test_repeats_alternate_which_trainer_runs_first(tmp_path, monkeypatch):
    mod = bench()
    tool = tmp_path / "tessera"
    tool.write_text("#!/bin/sh\necho 'libtorch trainer: yes'\n")
    tool.chmod(0o755)
    (tmp_path / "cora").mkdir()
    ran = []
    monkeypatch.setattr(mod, "run", lambda argv, what: ran.append(what))
    monkeypatch.setattr(mod, "summarize", lambda path: {
        "ms_per_step": 1.0, "parts_ms_per_step": {k: 0.2 for k in mod.PARTS}})
    monkeypatch.setattr(mod, "plot", lambda doc, png: None)
    out = tmp_path / "r.json"
    assert mod.main(["--tool", str(tool), "--datasets", str(tmp_path / "cora"), "--ranks", "1",
                     "--repeats", "3", "--out", str(out)]) == 0
    py, cpp = "python train_sage.py", "tessera train"
    assert ran == [py, cpp, cpp, py, py, cpp]
    runs = json.loads(out.read_text())["rows"][0]["runs"]
    assert [r["ran_first"] for r in runs["python"]] == [True, False, True]
    assert [r["ran_first"] for r in runs["cpp"]] == [False, True, False]
