# SPDX-License-Identifier: Apache-2.0
"""scripts/ncu_summary.py on the metric columns of a real ncu report (an H200 run of gpu-check's
bench phase): kernels are named, whatever form ncu gives the anonymous namespace, and bad input
gets one line naming the file."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ncu_summary.py"
CSV = pathlib.Path(__file__).resolve().parent / "data" / "ncu-sample.csv"

sys.path.insert(0, str(ROOT / "scripts"))
import ncu_summary  # noqa: E402


def test_short_names_drop_namespaces_and_arguments():
    assert ncu_summary.short_name(
        "void tessera::<unnamed>::sample_group_kernel<0>(tessera::HopArgs, unsigned long)"
    ) == "sample_group_kernel<0>"
    assert ncu_summary.short_name(
        "tessera::(anonymous namespace)::mark_kernel(tessera::HopArgs, unsigned long)"
    ) == "mark_kernel"
    assert ncu_summary.short_name(
        "void cub::DeviceScanKernel<cub::policy_hub<unsigned long>::Policy1000, int>(T2, T3)"
    ) == "DeviceScanKernel"


def test_summary_of_a_real_report(tmp_path):
    out = tmp_path / "ncu.json"
    r = subprocess.run([sys.executable, str(SCRIPT), str(CSV), "--json", str(out), "--meta",
                        "commit=abc1234", "--meta", "machine=NVIDIA-H200"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["commit"] == "abc1234" and d["machine"] == "NVIDIA-H200"
    kernels = {k["kernel"]: k for k in d["kernels"]}
    assert d["launches"] == 48 == sum(k["launches"] for k in d["kernels"])
    assert set(kernels) == {"sample_group_kernel<0>", "number_kernel", "mark_kernel",
                            "DeviceScanKernel", "relabel_kernel"}
    for k in kernels.values():
        assert k["time_us"] > 0
        assert 0 < k["achieved_occupancy_pct"] <= k["theoretical_occupancy_pct"] <= 100


def test_bad_meta_is_refused(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(CSV), "--json", str(tmp_path / "x.json"),
                        "--meta", "commit"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "KEY=VALUE" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_file_without_a_table_is_named(tmp_path):
    bad = tmp_path / "empty.csv"
    bad.write_text("==PROF== nothing profiled\n")
    r = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert "empty.csv" in r.stderr and "Traceback" not in r.stderr
