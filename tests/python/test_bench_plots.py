"""benchmarks/plot_sample.py on committed results: both plot modes write a PNG, and bad input
gets one line naming the file (no traceback)."""
import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "plot_sample.py"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = [RESULTS / "sample_rmat21_15-10-5_t1_s9_r1.json", RESULTS / "sample_rmat21_15-10-5_t1_s9_r2.json"]


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


def test_gpu_plot_names_bad_input(tmp_path):
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"benchmark": "sample", "params": {}}))
    r = subprocess.run([sys.executable, str(GPU_SCRIPT), str(cpu), "--out", str(tmp_path / "x.png")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "cpu.json" in r.stderr and "no results with a batch-size sweep" in r.stderr
    assert "Traceback" not in r.stderr
