# SPDX-License-Identifier: Apache-2.0
"""benchmarks/partition_bench.py's summary of a run: *everything else* is the run's wall time
less the METIS call, as benchmarks/results/README.md says, not the sum of the timed phases."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_overhead_is_wall_time_less_metis():
    spec = importlib.util.spec_from_file_location(
        "partition_bench", ROOT / "benchmarks" / "partition_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stats = {"num_nodes": 10, "num_edges": 20, "peak_rss_bytes": 1000, "wall_seconds": 1.5,
             "phases": [{"name": "read", "seconds": 0.2, "peak_rss_bytes": 500},
                        {"name": "METIS", "seconds": 0.5, "peak_rss_bytes": 900},
                        {"name": "halo + write", "seconds": 0.3, "peak_rss_bytes": 1000}]}
    s = mod.pipeline_summary(stats)
    assert s["total_seconds"] == 1.0  # the phases
    assert s["overhead_seconds"] == 1.0  # 1.5 s of wall time less 0.5 s of METIS
    assert s["overhead_over_metis"] == 2.0
