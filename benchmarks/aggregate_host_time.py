#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Host time per call of the mean aggregation of a training step, by each way Tessera can run it.

    python3 benchmarks/aggregate_host_time.py [--device cpu|cuda] [--calls 3000] [--rounds 5]
        [--machine-name vm] [--out benchmarks/results/aggregate-host-<device>]

A GPU training step in Python is bound by the host: the GPU waits while Python and torch issue
the step's operators. This measures what one forward + backward of ``tessera.nn``'s mean
aggregation costs the host, on a block so small that the work itself is negligible (``--edges``
edges, ``--feat`` columns; on the CPU Tessera's CPU twin runs on one thread, so no thread starts
per call), by each way:

  torch-op     ``torch.ops.tessera.mean_aggregate``: one dispatcher call, C++ autograd
  tessera.ops  ``tessera.ops.spmm`` inside a Python ``autograd.Function`` (DLPack capsules)
  index        ``index_select`` + ``index_add_`` + degree count + division (torch operators)

and of a whole SAGEConv layer on that block (``--feat`` columns in, half as many out):

  layer-op      ``torch.ops.tessera.sage_layer``: the layer in one call
  layer-python  SAGEConv's operators issued one by one from Python, the aggregation by the
                torch operator (what SAGEConv runs where the fused call is not taken)

next to the floor, the same autograd round trip without an aggregation (``h.sum().backward()``).
Rounds alternate the ways; each way's figure is its median round, net of the floor. On a GPU
the loop does not synchronize, as a training step does not (it synchronizes once at the end of
each round). Writes <out>/<date>-<commit>-<machine>.json and a bar plot beside it (.png)."""
import argparse
import datetime
import json
import os
import platform
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WAYS = ("torch-op", "tessera.ops", "index", "layer-op", "layer-python", "floor")


def make_calls(device, edges: int, feat: int):
    import torch

    from tessera import _torch_ops
    from tessera.nn import SAGEConv, _SortedMean, mean_aggregate

    ops = _torch_ops.ops()
    if ops is None:
        raise SystemExit(f"aggregate_host_time: the torch operator library is unusable: "
                         f"{_torch_ops.why()}")
    num_dst = max(1, edges // 4)
    g = torch.Generator().manual_seed(0)
    dst = torch.sort(torch.randint(0, num_dst, (edges,), generator=g)).values.to(device)
    src = torch.randint(0, 2 * num_dst, (edges,), generator=g).to(device)
    indptr = torch.searchsorted(dst, torch.arange(num_dst + 1, device=device))
    h0 = torch.randn(2 * num_dst, feat, generator=g).to(device)

    def run(agg):
        def call():
            h = h0.detach().requires_grad_()
            agg(h).sum().backward()
        return call

    conv = SAGEConv(feat, max(1, feat // 2)).to(device)
    w_self, w_neigh, bias = conv.fc_self.weight, conv.fc_neigh.weight, conv.bias

    def layer_python(h):  # SAGEConv's unfused operators (projection first: in > out)
        return conv.fc_self(h[:num_dst]) + ops.mean_aggregate(conv.fc_neigh(h), src, indptr)

    return {"torch-op": run(lambda h: ops.mean_aggregate(h, src, indptr)),
            "tessera.ops": run(lambda h: _SortedMean.apply(h, src, indptr, "rows")),
            "index": run(lambda h: mean_aggregate(h, src, dst, num_dst)),
            "layer-op": run(lambda h: ops.sage_layer(h, src, indptr, w_self, w_neigh, bias)),
            "layer-python": run(layer_python),
            "floor": run(lambda h: h)}


def plot(res: dict, path: str) -> None:
    from tessera.utils import pyplot

    plt = pyplot("aggregate_host_time")
    if plt is None:
        return
    ways = [w for w in WAYS if w != "floor"]  # the aggregation's three, then the layer's two
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.barh(ways, [res["net_us"][w] for w in ways], color=["C2", "C0", "C1", "C2", "C0"])
    for i, w in enumerate(ways):
        ax.text(res["net_us"][w], i, f" {res['net_us'][w]:.1f} us", va="center", fontsize=8)
    ax.set_xlim(0, 1.2 * max(res["net_us"][w] for w in ways))
    ax.set_xlabel("host microseconds per forward + backward, net of the autograd floor")
    ax.set_title(f"mean aggregation and SAGE layer: host time per call on {res['device']} "
                 f"({res['edges']} edges x {res['feat']} columns)", fontsize=9)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--calls", type=int, default=3000, help="calls per way and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--edges", type=int, default=64)
    ap.add_argument("--feat", type=int, default=8)
    ap.add_argument("--machine-name", default="vm")
    ap.add_argument("--out", default=None,
                    help="results folder (default benchmarks/results/aggregate-host-<device>)")
    a = ap.parse_args()
    if a.calls < 1 or a.rounds < 1 or a.edges < 1 or a.feat < 1:
        ap.error("--calls, --rounds, --edges and --feat must be >= 1")
    os.environ["TESSERA_NUM_THREADS"] = "1"  # before tessera loads: one CPU-twin thread
    import torch

    import tessera
    from tessera.utils import commit_id

    if a.device == "cuda" and not (torch.cuda.is_available() and tessera._C.cuda_compiled):
        raise SystemExit("aggregate_host_time: --device cuda needs a GPU and a CUDA build")
    torch.set_num_threads(1)
    device = torch.device(a.device)
    calls = make_calls(device, a.edges, a.feat)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    for f in calls.values():  # warm up: allocator, autograd, the library's first load
        for _ in range(200):
            f()
    sync()
    rounds = {w: [] for w in WAYS}
    for r in range(a.rounds):
        order = WAYS if r % 2 == 0 else WAYS[::-1]
        for w in order:
            f = calls[w]
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            sync()
            rounds[w].append((time.perf_counter() - t0) / a.calls * 1e6)
        print(f"[aggregate_host_time] round {r + 1}/{a.rounds}: " +
              ", ".join(f"{w} {rounds[w][-1]:.1f} us" for w in WAYS), file=sys.stderr, flush=True)
    med = {w: sorted(v)[len(v) // 2] for w, v in rounds.items()}
    net = {w: med[w] - med["floor"] for w in WAYS if w != "floor"}
    commit = commit_id(os.path.abspath(__file__))
    date = datetime.date.today().isoformat()
    res = {"benchmark": f"aggregate-host-{a.device}",
           "command": " ".join(["benchmarks/aggregate_host_time.py"] + sys.argv[1:]),
           "commit": commit, "date": date, "machine": a.machine_name,
           "host": {"cpu": platform.processor() or platform.machine(),
                    "hardware_threads": os.cpu_count()},
           "device": str(device), "torch": torch.__version__, "edges": a.edges, "feat": a.feat,
           "calls": a.calls, "rounds": a.rounds,
           "torch_op_us": net["torch-op"], "tessera_ops_us": net["tessera.ops"],
           "index_us": net["index"], "floor_us": med["floor"],
           "layer_op_us": net["layer-op"], "layer_python_us": net["layer-python"],
           "ratio_torch_op_vs_tessera_ops": net["torch-op"] / net["tessera.ops"],
           "ratio_torch_op_vs_index": net["torch-op"] / net["index"],
           "ratio_layer_op_vs_python": net["layer-op"] / net["layer-python"],
           "net_us": net, "median_us": med, "rounds_us": rounds}
    out_dir = a.out or os.path.join(REPO, "benchmarks", "results", f"aggregate-host-{a.device}")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{date}-{commit}-{a.machine_name}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    plot(res, os.path.splitext(out)[0] + ".png")
    print(f"host us per forward + backward, net of the {med['floor']:.1f} us floor: " +
          ", ".join(f"{w} {net[w]:.1f}" for w in net) + f"; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
