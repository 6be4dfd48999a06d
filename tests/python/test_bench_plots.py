# SPDX-License-Identifier: Apache-2.0
"""benchmarks/plot_sample.py on committed results: both plot modes write a PNG, and bad input
gets one line naming the file (no traceback)."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "plot_sample.py"
RESULTS = ROOT / "benchmarks" / "results"
# Two committed CPU runs (whatever their dates): the stored and the degree node order.
RUNS = [sorted((RESULTS / d).glob("*.json"))[-1] for d in ("sample-cpu-t1", "sample-cpu-t1-degree")]


def plot(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("mode", [[], ["--ratios"]])
def test_writes_a_png(tmp_path, mode):
    out = tmp_path / "plot.png"
    r = plot(*mode, *RUNS, "--out", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ratio_labels_come_from_the_results(tmp_path):
    # The ratio plot reads ratio_per_core and the single rounds; a result without them is skipped.
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"params": {}}))
    r = plot("--ratios", bad, "--out", tmp_path / "x.png")
    assert r.returncode != 0
    assert "other.json" in r.stderr and "no results with a ratio" in r.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("content, why", [(None, "cannot read"), ("not json", "is not JSON")])
def test_bad_input_is_named(tmp_path, content, why):
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    for mode in ([], ["--ratios"]):
        r = plot(*mode, path, "--out", tmp_path / "x.png")
        assert r.returncode != 0
        assert why in r.stderr and str(path) in r.stderr
        assert "Traceback" not in r.stderr
        assert not (tmp_path / "x.png").exists()


def plot_module():
    spec = importlib.util.spec_from_file_location("plot_sample", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lines_and_bars_are_keyed_by_graph_node_order_and_commit(tmp_path, capsys):
    # One graph at one thread count in stored and degree order: two lines, two bars, each
    # naming the graph and the order (not one line through two points at threads=1, nor the
    # larger of the two as the bar); a third commit is named once commits are mixed; a result
    # of the older harness (no single rounds) is skipped with a note.
    mod = plot_module()
    base = json.loads(RUNS[0].read_text())
    paths = []
    for name, order, commit in (("s", "stored", "aaaaaaa"), ("d", "degree", "aaaaaaa")):
        j = json.loads(json.dumps(base))
        j["graph"]["node_order"], j["commit"], j["params"]["threads"] = order, commit, 1
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(j))
    old = json.loads(json.dumps(base))
    del old["reference"]["round_ratios"]
    paths.append(tmp_path / "old.json")
    paths[-1].write_text(json.dumps(old))
    runs = mod.load(paths)
    assert "old.json: made by an older harness" in capsys.readouterr().err
    graph = base["graph"]["spec"]
    lines = mod.line_series(runs)
    assert sorted(lines) == [f"tessera {graph} degree order no-replace [15,10,5]",
                             f"tessera {graph} stored order no-replace [15,10,5]"]
    assert all(len(pts) == 1 for pts in lines.values())
    _, bars = mod.bar_series(runs)
    assert sorted(bars) == [f"tessera {graph} degree order 1 thread(s)",
                            f"tessera {graph} stored order 1 thread(s)"]
    runs[0]["commit"] = "bbbbbbb"
    assert f"tessera {graph} stored order no-replace [15,10,5] @bbbbbbb" in mod.line_series(runs)


GPU_SCRIPT = ROOT / "benchmarks" / "plot_sample_gpu.py"


def gpu_result(path, weighted=False, row_read_limit=False):
    """A result in the layout `tessera bench sample --device cuda --sweep` writes (figures made
    up); `row_read_limit`: the current limit, else the single-entry rate older files carry."""
    best = {"batches_per_call": 4, "streams": 2, "pipelined": True, "edges_per_s": 3e9}
    limit = ({"edges_per_s": 2e10, "single_entry_random_reads_per_s": 4e10, "memcpy_gbps": 2000.0}
             if row_read_limit else {"random_reads_per_s": 2e10, "memcpy_gbps": 2000.0})
    j = {"benchmark": "sample", "commit": "abc1234", "device": "test",
         "graph": {"spec": "rmat:21,25", "placement": "uva" if weighted else "gpu"},
         "params": {"fanouts": [15, 10, 5], "weighted": weighted},
         "limit": limit,
         "target": {"edges_per_s": 5e9},
         "sweep": [{"batch_size": b, "one_stream": {"edges_per_s": 1e6 * b}, "best": best}
                   for b in (256, 1024, 8192)]}
    path.write_text(json.dumps(j))
    return path


def test_gpu_plot_writes_a_png_and_the_table(tmp_path):
    out = tmp_path / "gpu.png"
    r = subprocess.run([sys.executable, str(GPU_SCRIPT), str(gpu_result(tmp_path / "a.json")),
                        str(gpu_result(tmp_path / "b.json", True)), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "8192 seeds: one stream 8.192 G/s (0.41 of the limit), best 3.000 G/s (0.15)" in r.stdout


def test_gpu_plot_draws_the_row_read_limit(tmp_path):
    out = tmp_path / "gpu.png"
    r = subprocess.run([sys.executable, str(GPU_SCRIPT),
                        str(gpu_result(tmp_path / "a.json", row_read_limit=True)),
                        str(gpu_result(tmp_path / "b.json")), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "limit (row reads) 20.000 G/s" in r.stdout
    assert "random-read rate 20.000 G/s" in r.stdout
    assert "8192 seeds: one stream 8.192 G/s (0.41 of the limit), best 3.000 G/s (0.15)" in r.stdout


def test_gpu_plot_scores_each_batch_size_against_its_own_limit(tmp_path):
    """A sweep whose sizes carry their own limits is scored against them (the main run's limit
    put a batch of 8192 above 1 of it)."""
    p = gpu_result(tmp_path / "a.json", row_read_limit=True)
    j = json.loads(p.read_text())
    for s in j["sweep"]:
        s["limit_edges_per_s"] = 1e7 * s["batch_size"]
    p.write_text(json.dumps(j))
    out = tmp_path / "gpu.png"
    r = subprocess.run([sys.executable, str(GPU_SCRIPT), str(p), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "8192 seeds: one stream 8.192 G/s (0.10 of the limit), best 3.000 G/s (0.04)" in r.stdout
    assert "256 seeds: one stream 0.256 G/s (0.10 of the limit)" in r.stdout


def test_gpu_plot_names_bad_input(tmp_path):
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"benchmark": "sample", "params": {}}))
    r = subprocess.run([sys.executable, str(GPU_SCRIPT), str(cpu), "--out", str(tmp_path / "x.png")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "cpu.json" in r.stderr and "no results with a batch-size sweep" in r.stderr
    assert "Traceback" not in r.stderr


UA_SCRIPT = ROOT / "benchmarks" / "plot_update_all.py"


def test_update_all_plot_writes_a_png_and_names_bad_input(tmp_path):
    res = tmp_path / "ua.json"
    res.write_text(json.dumps({  # the layout `tessera bench update-all --json` writes (made up)
        "benchmark": "update-all", "graph": "rmat:16,25", "world_size": 2, "device": "cpu",
        "features": 100, "update_all_edges_per_second": 2e7,
        "local_spmm_edges_per_second": 4e7, "local_spmm": "ops::spmm CPU twin",
        "ratio_update_all_vs_local_spmm": 0.5}))
    out = tmp_path / "ua.png"
    r = subprocess.run([sys.executable, str(UA_SCRIPT), str(res), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmark": "update-all", "world_size": 2}))
    r = subprocess.run([sys.executable, str(UA_SCRIPT), str(bad), "--out",
                        str(tmp_path / "x.png")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "bad.json" in r.stderr and "missing field" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "x.png").exists()

PEER_SCRIPT = ROOT / "benchmarks" / "plot_sample_peer.py"
PEER_RUNS = sorted(RESULTS.glob("sample-peer-dgl*/*.json"))


@pytest.mark.parametrize("run", PEER_RUNS, ids=lambda p: p.parent.name)
def test_peer_plot_writes_a_png(tmp_path, run):
    out = tmp_path / "peer.png"
    r = subprocess.run([sys.executable, str(PEER_SCRIPT), str(run), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("content, why", [(None, "cannot read"), ("not json", "is not JSON"),
                                          ('{"cases": []}', "holds no cases")])
def test_peer_plot_names_bad_input(tmp_path, content, why):
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    r = subprocess.run([sys.executable, str(PEER_SCRIPT), str(path), "--out",
                        str(tmp_path / "x.png")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert why in r.stderr and str(path) in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.png").exists()
