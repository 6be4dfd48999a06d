#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DGL's own distributed GraphSAGE script on DGL and on Tessera: epoch time, inference time and
accuracy of the same training job, one machine, in alternating rounds.

    python3 benchmarks/dgl_train_peer.py --dataset data/cora --undirected \\
        --dataset rmat:17,25 --trainers 1,2 --rounds 3 --epochs 4 \\
        --machine cpu-2core --results benchmarks/results --plot

The job is DGL's ``examples/distributed/graphsage/node_classification.py`` as
``python/examples/dgl_style_sage.py`` holds it (3 layers, hidden 256, fanouts 15,10,5, batch
1024 by default; its own timers and printouts). Each case (dataset x trainers T) runs it:

* ``dgl``: DGL's script itself, rewritten from that file by undoing its rename (``tessera`` back
  to ``dgl``) plus DGL 1.x's two spellings (``initialize(ip_config)`` without
  ``use_graphbolt``; ``dgl.dataloading.DistNodeDataLoader``), over a partitioning by DGL's
  ``dgl.distributed.partition_graph`` (METIS, 1 part, T trainers per machine, balanced train
  nodes and edges) and DGL's runtime as its ``launch.py`` starts it on one machine: one server
  process (``DGL_ROLE=server``) and T trainer processes (``DGL_ROLE=client``, torch's gloo
  process group, ``DistributedDataParallel``), sampling and features over DGL's shared memory
  and RPC;
* ``tessera``: the same file over ``tessera.partition_graph``'s partitioning of the same graph
  (the same options), under ``python -m tessera launch --nproc-per-node T``.

Each trainer of either gets ``OMP_NUM_THREADS`` = hardware threads / T (DGL's ``launch.py``
defaults to half that, leaving cores to its servers and samplers; here both sides get the same
share), Tessera's trainers also ``TESSERA_NUM_THREADS``; DGL's server gets 1 thread, as
``launch.py``'s ``--num_server_threads`` default. The two partitionings must hold the same
number of edges, else the case fails.
One machine only: DGL finds its machine by IP address, so two DGL "machines" on one host
would share a local partition (and its shared memory names); its multi-machine path needs
machines.

Per run the figures are the script's own: the mean of its "Epoch Time(s)" lines after the first
epoch (over the trainers), the final layer-wise inference ("time:" of its evaluation, the
slowest trainer), test accuracy (the mean of the trainers' own test splits), and the wall time
of the run, start-up and loading included. Round r runs both peers, the order alternating, and
the figure is the median of the per-round ratios dgl / tessera (above 1: Tessera is faster),
with their range. As in dgl_sample_peer.py, ``/proc/stat`` is read around each case: when other
processes took more than ``--max-busy`` of the machine, the case is marked ``"busy": true``.

``rmat:S,EF`` makes a products-like graph with ``tessera generate rmat`` (100 features, 47
classes, 8% / 1.6% / 10% train / validation / test, symmetrized; random labels, so its accuracy
is chance). Writes one JSON (``--json PATH``, or ``--results DIR``:
DIR/train-peer-dgl<MAJOR.MINOR>/<date>-<commit>-<machine>.json) and, with ``--plot``, a plot
beside it.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EXAMPLES = os.path.join(REPO, "python", "examples")
SCRIPT = os.path.join(EXAMPLES, "dgl_style_sage.py")
sys.path.insert(0, HERE)
sys.path.insert(0, EXAMPLES)

from dgl_sample_peer import (commit_id, cpu_ticks, machine_load, machine_record,  # noqa: E402
                             own_cpu_seconds, write_result)

#: The rewrite of dgl_style_sage.py into DGL's script: (pattern, replacement, how many times).
#: A count that does not match fails the run, so a change of the example cannot silently give
#: DGL another script.
TO_DGL = [
    (r"^import tessera\.nn as dglnn$", "import dgl.nn.pytorch as dglnn", 1),
    (r"^import tessera\.distributed$", "import dgl.distributed", 1),
    (r"^import tessera$", "import dgl", 1),
    (r"tessera\.distributed\.initialize\(args\.ip_config, use_graphbolt=args\.use_graphbolt\)",
     "dgl.distributed.initialize(args.ip_config)", 1),
    (r"tessera\.distributed\.DistNodeDataLoader", "dgl.dataloading.DistNodeDataLoader", 2),
    (r"\btessera\.", "dgl.", 14),
]

EPOCH = re.compile(r"Part (\d+), Epoch Time\(s\): ([0-9.]+), sample\+data_copy: ([0-9.]+), "
                   r"forward: ([0-9.]+), backward: ([0-9.]+), update: ([0-9.]+)")
EVAL = re.compile(r"Part (\d+), Val Acc ([0-9.]+), Test Acc ([0-9.]+), time: ([0-9.]+)")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", action="append", required=True,
                   help="npy dataset folder or rmat:SCALE,EF (repeat for several)")
    p.add_argument("--undirected", action="store_true",
                   help="symmetrize the datasets whose meta.json does not say they are (DGL: "
                        "to_bidirected; Tessera: symmetrize=True)")
    p.add_argument("--trainers", default="1", help="trainers per machine, e.g. 1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=4, help="epochs per run (the first is not timed)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--fan-out", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--timeout", type=float, default=1800, help="seconds allowed to one run")
    p.add_argument("--max-busy", type=float, default=0.1)
    p.add_argument("--tool", default=os.path.join(REPO, "build", "bin", "tessera"),
                   help="the tessera CLI (for rmat:S,EF)")
    p.add_argument("--keep", help="keep the partitionings and logs in this folder")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--results", help="write DIR/train-peer-dgl<MAJOR.MINOR>/"
                                      "<date>-<commit>-<machine>.json")
    p.add_argument("--machine", default=socket.gethostname())
    p.add_argument("--plot", action="store_true", help="also draw the JSON (same name, .png)")
    return p.parse_args()


def fail(msg):
    sys.exit(f"dgl_train_peer: {msg}")


class PeerFailed(Exception):
    """A peer's run failed; main keeps the work folder (its logs) and exits naming it."""


def dgl_script(path):
    """Writes DGL's script, rewritten from dgl_style_sage.py, to ``path``."""
    with open(SCRIPT) as f:
        text = f.read()
    body_at = text.index('"""', text.index('r"""') + 4) + 3  # the docstring stays as it is
    head, body = text[:body_at], text[body_at:]
    for pattern, repl, count in TO_DGL:
        body, n = re.subn(pattern, repl, body, flags=re.M)
        if n != count:
            fail(f"rewriting {SCRIPT} for DGL: '{pattern}' matched {n} times, expected {count}")
    if "tessera" in body:
        fail(f"rewriting {SCRIPT} for DGL: 'tessera' is left in the code")
    with open(path, "w") as f:
        f.write(head + body)


def dataset_folder(spec, work, tool):
    """The npy folder of ``spec``: the folder itself, or rmat:S,EF generated into ``work``."""
    m = re.fullmatch(r"rmat:(\d+),(\d+)", spec)
    if not m:
        if not os.path.isdir(spec):
            fail(f"--dataset {spec} is neither a folder nor rmat:SCALE,EF")
        return spec
    out = os.path.join(work, f"rmat{m[1]}-{m[2]}")
    cmd = [tool, "generate", "rmat", "--scale", m[1], "--edge-factor", m[2], "--feat-dim", "100",
           "--num-classes", "47", "--train-frac", "0.08", "--val-frac", "0.016",
           "--test-frac", "0.1", "--symmetrize", "--out", out, "--name", os.path.basename(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return out


def partition(folder, name, trainers, undirected, work):
    """(DGL's config, Tessera's config, their edge counts) of 1-part partitionings."""
    import numpy as np
    import torch
    import dgl
    import tessera
    from dgl_style_partition import load_npy

    g, _ = load_npy(folder)
    try:
        with open(os.path.join(folder, "meta.json")) as f:
            undirected = undirected and not json.load(f).get("symmetrized", False)
    except FileNotFoundError:
        pass
    src, dst = (np.array(a, dtype=np.int64) for a in g["edge_index"])
    dg = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=g["num_nodes"])
    for k, v in g["ndata"].items():
        dg.ndata[k] = torch.from_numpy(np.asarray(v))
    if undirected:
        dg = dgl.to_bidirected(dg, copy_ndata=True)
    d_out, t_out = os.path.join(work, f"dgl-{name}-t{trainers}"), \
        os.path.join(work, f"tessera-{name}-t{trainers}")
    dgl.distributed.partition_graph(dg, name, 1, d_out, part_method="metis",
                                    balance_ntypes=dg.ndata["train_mask"], balance_edges=True,
                                    num_trainers_per_machine=trainers)
    tessera.partition_graph(g, name, 1, t_out, part_method="metis",
                            balance_ntypes=g["ndata"]["train_mask"], balance_edges=True,
                            num_trainers_per_machine=trainers, symmetrize=undirected)
    with open(os.path.join(t_out, f"{name}.json")) as f:
        t_edges = json.load(f).get("num_edges")
    if t_edges != int(dg.num_edges()):
        fail(f"{folder}: DGL's partitioning holds {int(dg.num_edges())} edges and Tessera's "
             f"{t_edges}: not the same graph (repeated pairs or self loops symmetrized "
             "differently?)")
    return (os.path.join(d_out, f"{name}.json"), os.path.join(t_out, f"{name}.json"),
            {"dgl": int(dg.num_edges()), "tessera": t_edges})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_dgl(script, conf, name, trainers, args, env, logs, timeout):
    """DGL's runtime on one machine as its launch.py starts it: a server, then the trainers."""
    ip = os.path.join(logs, "ip_config.txt")
    with open(ip, "w") as f:
        f.write(f"127.0.0.1 {free_port()}\n")
    common = {**env, "DGL_NUM_SAMPLER": "0", "DGL_NUM_SERVER": "1",
              "DGL_NUM_CLIENT": str(trainers), "DGL_CONF_PATH": conf, "DGL_IP_CONFIG": ip,
              "DGL_GRAPH_FORMAT": "csc"}
    cmd = [sys.executable, script, "--graph_name", name, "--ip_config", ip,
           "--part_config", conf, *args]
    procs, outs = [], []
    server_log = open(os.path.join(logs, "dgl-server.log"), "w")
    server = subprocess.Popen(cmd, env={**common, "DGL_ROLE": "server", "DGL_SERVER_ID": "0",
                                        "OMP_NUM_THREADS": "1"},  # launch.py's server default
                              stdout=server_log, stderr=subprocess.STDOUT)
    master = str(free_port())
    for r in range(trainers):
        out = open(os.path.join(logs, f"dgl-trainer{r}.log"), "w+")
        outs.append(out)
        procs.append(subprocess.Popen(cmd, env={
            **common, "DGL_DIST_MODE": "distributed", "DGL_ROLE": "client", "DGL_GROUP_ID": "0",
            "RANK": str(r), "WORLD_SIZE": str(trainers), "LOCAL_RANK": str(r),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": master}, stdout=out,
            stderr=subprocess.STDOUT))
    everyone = procs + [server]
    deadline = time.monotonic() + timeout
    codes = [None] * len(everyone)
    try:  # until all exit, or one fails (the others would wait for it until the timeout)
        while any(c is None for c in codes) and time.monotonic() < deadline:
            codes = [p.poll() for p in everyone]
            if any(c not in (None, 0) for c in codes):
                break
            time.sleep(0.05)
    finally:
        for p in everyone:
            if p.poll() is None:
                p.kill()
                p.wait()
        server_log.close()
    text = ""
    for out in outs:
        out.seek(0)
        text += out.read()
        out.close()
    if any(c != 0 for c in codes):
        with open(os.path.join(logs, "dgl-server.log")) as f:
            server_text = f.read()
        what = "timed out" if all(c in (None, 0) for c in codes) else "failed"
        raise PeerFailed(f"DGL's run {what} (exit codes of trainers and server: {codes}); "
                         f"logs in {logs}\ntrainers:\n{text[-2500:]}\nserver:\n"
                         f"{server_text[-1500:]}")
    return text


def run_tessera(conf, name, trainers, args, env, logs, timeout):
    cmd = [sys.executable, "-m", "tessera", "launch", "--nproc-per-node", str(trainers), "--",
           sys.executable, SCRIPT, "--graph_name", name, "--part_config", conf, *args]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PeerFailed(f"Tessera's run took longer than {timeout} s: {' '.join(cmd)}")
    with open(os.path.join(logs, "tessera.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise PeerFailed(f"Tessera's run failed (exit code {r.returncode}): {' '.join(cmd)}; "
                         f"logs in {logs}\n{(r.stdout + r.stderr)[-3000:]}")
    return r.stdout + r.stderr


def figures(text, trainers, epochs):
    """The script's own figures from its printouts (every trainer's lines)."""
    per_trainer = {}
    for m in EPOCH.finditer(text):
        per_trainer.setdefault(m[1], []).append(tuple(float(x) for x in m.groups()[1:]))
    ev = [m.groups() for m in EVAL.finditer(text)]
    if sorted(len(v) for v in per_trainer.values()) != [epochs] * trainers or len(ev) < trainers:
        fail(f"expected {epochs} epoch lines and an evaluation from each of {trainers} "
             f"trainers, got {dict((k, len(v)) for k, v in per_trainer.items())} and "
             f"{len(ev)} evaluations:\n{text[-3000:]}")
    timed = [e for rows in per_trainer.values() for e in rows[1:]]  # the first is warm-up
    last = ev[-trainers:]
    return {"epoch_s": statistics.mean(e[0] for e in timed),
            "sample_s": statistics.mean(e[1] for e in timed),
            "forward_s": statistics.mean(e[2] for e in timed),
            "backward_s": statistics.mean(e[3] for e in timed),
            "update_s": statistics.mean(e[4] for e in timed),
            "inference_s": max(float(t) for *_, t in last),
            "test_acc": statistics.mean(float(a) for _, _, a, _ in last),
            "val_acc": statistics.mean(float(v) for _, v, _, _ in last)}


def ratio(rounds, key):
    per = [r["dgl"][key] / r["tessera"][key] for r in rounds if r["tessera"][key] > 0]
    return {"median": statistics.median(per), "min": min(per), "max": max(per),
            "per_round": per} if per else None


def run_case(spec, folder, trainers, a, work, dgl_py):
    name = re.sub(r"[^A-Za-z0-9]", "", os.path.basename(os.path.normpath(folder)))
    print(f"{spec}, {trainers} trainer(s): partitioning", file=sys.stderr, flush=True)
    d_conf, t_conf, edges = partition(folder, name, trainers, a.undirected, work)
    threads = max(1, (os.cpu_count() or 1) // trainers)
    # Each trainer's share of the cores, for torch and DGL (OpenMP) and Tessera's own loops.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TESSERA_NUM_THREADS": str(threads)}
    args = ["--num_epochs", str(a.epochs), "--num_hidden", str(a.hidden),
            "--num_layers", str(a.layers), "--fan_out", a.fan_out,
            "--batch_size", str(a.batch_size), "--lr", str(a.lr),
            "--eval_every", str(a.epochs + 1)]
    logs = os.path.join(work, f"logs-{name}-t{trainers}")
    os.makedirs(logs, exist_ok=True)
    rounds = []
    before, own0 = cpu_ticks(), own_cpu_seconds()
    for r in range(a.rounds):
        res = {"round": r}
        order = ["dgl", "tessera"] if r % 2 == 0 else ["tessera", "dgl"]
        for peer in order:
            t0 = time.perf_counter()
            if peer == "dgl":
                text = run_dgl(dgl_py, d_conf, name, trainers, args, env, logs, a.timeout)
            else:
                text = run_tessera(t_conf, name, trainers, args, env, logs, a.timeout)
            res[peer] = {**figures(text, trainers, a.epochs),
                         "wall_s": time.perf_counter() - t0}
        rounds.append(res)
        print(f"{spec}, {trainers} trainer(s), round {r}: epoch dgl "
              f"{res['dgl']['epoch_s']:.3f} s, tessera {res['tessera']['epoch_s']:.3f} s; "
              f"inference dgl {res['dgl']['inference_s']:.2f} s, tessera "
              f"{res['tessera']['inference_s']:.2f} s", file=sys.stderr, flush=True)
    load = machine_load(before, cpu_ticks(), own_cpu_seconds() - own0)
    busy = None if load is None else load["others"] + load["steal"] > a.max_busy
    if busy:
        print(f"warning: {spec}, {trainers} trainer(s): other processes took "
              f"{load['others']:.0%} of the machine and the hypervisor {load['steal']:.0%}; "
              "the case is marked busy", file=sys.stderr)
    keys = ("epoch_s", "inference_s", "wall_s")
    return {"dataset": spec, "trainers": trainers, "omp_threads": threads,
            "tessera_threads": threads, "dgl_server_threads": 1, "edges": edges,
            "rounds": rounds, "busy": busy, "load": load,
            "median": {p: {k: statistics.median(r[p][k] for r in rounds)
                           for k in keys + ("test_acc", "sample_s", "forward_s", "backward_s")}
                       for p in ("dgl", "tessera")},
            "ratios": {k: ratio(rounds, k) for k in keys}}


def plot(path, out):
    from tessera.utils import pyplot
    plt = pyplot("dgl_train_peer")
    if plt is None:
        return
    with open(path) as f:
        d = json.load(f)
    cases = d["cases"]
    labels = [f"{c['dataset']}\n{c['trainers']} trainer(s)" for c in cases]
    fig, axes = plt.subplots(1, 3, figsize=(6 + 3.3 * len(cases), 4.2))
    for ax, key, title in ((axes[0], "epoch_s", "training epoch (after the first)"),
                           (axes[1], "inference_s", "layer-wise inference, all nodes"),
                           (axes[2], "wall_s", "whole run, start-up included")):
        for i, peer in enumerate(("dgl", "tessera")):
            vals = [[r[peer][key] for r in c["rounds"]] for c in cases]
            med = [statistics.median(v) for v in vals]
            lo = [m - min(v) for m, v in zip(med, vals)]
            hi = [max(v) - m for m, v in zip(med, vals)]
            xs = [j + (i - 0.5) * 0.38 for j in range(len(cases))]
            ax.bar(xs, med, 0.36, yerr=[lo, hi], capsize=3,
                   label=f"DGL {d['versions']['dgl']}" if peer == "dgl" else "Tessera")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("seconds (median round, range)")
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"DGL's distributed GraphSAGE script, one machine ({d['machine']['name']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    a = parse_args()
    try:
        trainers_list = [int(t) for t in a.trainers.split(",")]
    except ValueError:
        fail(f"--trainers '{a.trainers}' must be comma-separated integers")
    if min(trainers_list) < 1 or min(a.rounds, a.epochs, a.hidden, a.layers,
                                     a.batch_size) < 1:
        fail("--trainers, --rounds, --epochs, --hidden, --layers and --batch-size must be >= 1")
    if a.epochs < 2:
        fail("--epochs must be >= 2: the first epoch is not timed")
    if len(a.fan_out.split(",")) != a.layers:
        fail(f"--fan-out {a.fan_out} must give one fanout per layer ({a.layers})")
    if any(s.startswith("rmat:") for s in a.dataset) and not os.access(a.tool, os.X_OK):
        fail(f"--tool {a.tool} is not an executable (needed for rmat: datasets)")
    import dgl
    import torch
    work = a.keep or tempfile.mkdtemp(prefix="tessera-train-peer-")
    os.makedirs(work, exist_ok=True)
    failed = True
    try:
        dgl_py = os.path.join(work, "dgl_node_classification.py")
        dgl_script(dgl_py)
        cases = []
        for spec in a.dataset:
            folder = dataset_folder(spec, work, a.tool)
            for t in trainers_list:
                c = run_case(spec, folder, t, a, work, dgl_py)
                cases.append(c)
                rt = c["ratios"]
                print(f"{spec}, {t} trainer(s): DGL / Tessera epoch "
                      f"{rt['epoch_s']['median']:.2f}x ({rt['epoch_s']['min']:.2f}-"
                      f"{rt['epoch_s']['max']:.2f}), inference "
                      f"{rt['inference_s']['median']:.2f}x, wall {rt['wall_s']['median']:.2f}x; "
                      f"test accuracy DGL {c['median']['dgl']['test_acc']:.3f}, Tessera "
                      f"{c['median']['tessera']['test_acc']:.3f}", flush=True)
        failed = False
    except PeerFailed as e:
        fail(str(e))  # the work folder, with the logs it names, is kept
    finally:
        if not a.keep and not failed:
            shutil.rmtree(work, ignore_errors=True)
    out = {
        "benchmark": "train-peer",
        "command": " ".join(["python3"] + sys.argv),
        "commit": commit_id(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine_record(a.machine),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "dgl": dgl.__version__},
        "params": {"epochs": a.epochs, "hidden": a.hidden, "layers": a.layers,
                   "fan_out": a.fan_out, "batch_size": a.batch_size, "lr": a.lr,
                   "rounds": a.rounds, "undirected": a.undirected},
        "cases": cases,
    }
    path = write_result(out, a.json, a.results, "train-peer", dgl.__version__, a.machine)
    if path and a.plot:
        plot(path, os.path.splitext(path)[0] + ".png")


if __name__ == "__main__":
    main()
