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
