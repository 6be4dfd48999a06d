#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains GraphSAGE with mini-batch neighbor sampling on a partitioned graph.

    python python/examples/train_sage.py --dataset data/cora --parts 1
    python python/examples/train_sage.py --dataset data/tolokers --split all

The script is the one DGL users know (partition_graph, initialize, DistGraph, node_split,
DistNodeDataLoader, SAGEConv). It partitions the dataset (or reuses a partitioning), trains,
prints the loss and validation metric per epoch, the test metric of the epoch with the best
validation metric, and draws the loss curve. ``--checkpoint`` saves model, optimizer, RNG and
loader position after every epoch (a file per rank with several); ``--resume`` continues from
it, and reaches bitwise the same parameters as an uninterrupted run (with ``--threads 1``).
Without a checkpoint yet it starts at epoch 0; it is refused on every rank when the ranks'
checkpoints are at different epochs (one rank's save lost), only files of another world size
or ``--split`` form exist, or the checkpoint was made with another dataset or other settings
(it records them; ``--epochs`` may change).

Distributed: ``tessera launch --nproc-per-node P -- python train_sage.py --dataset D`` runs P
ranks; rank 0 partitions D into P parts (once; reused), rank r loads partition r, samples
remote neighborhoods and reads remote features through the runtime, and the gradients are
averaged over the ranks after every step (one all-reduce). ``--batching global`` (default)
cuts the training nodes into global batches shared round-robin by the ranks, keyed so the
batches are the same for any P; ``--batching split`` is DGL's node_split share per rank.
``--parts M`` with M dividing P (DGL's ``num_trainers_per_machine``): M parts, each shared by
P / M trainers of one machine (``tessera launch --nnodes M --nproc-per-node P/M``); with global
batches the run reaches bitwise the parameters of P parts on P ranks.

Without a launcher, ``--parts P > 1`` runs the P trainers *in one process* (simulated mode):
trainer r takes ``node_split(..., rank=r, world_size=P)``, and the P losses are averaged
before one optimizer step, as the all-reduce would do.

``--device auto`` (default) trains on a GPU when torch sees one, else on the CPU; under a
launcher each rank takes ``cuda:<LOCAL_RANK % GPUs>``. On a GPU the whole step stays there:
``DistGraph.place_on_device`` puts the rank's sampling structure, labels and features in GPU
memory (or pinned host memory read through UVA, with a GPU cache of the hottest rows, when they
do not fit ``--gpu-budget``), the loader samples with the GPU sampler and gathers every batch's
features and labels straight into device memory on its own streams, ``--prefetch`` batches
ahead, and the loss is read back every ``--log-every`` steps. Gradients are all-reduced by
``--grad-sync``: DistributedDataParallel over NCCL (buckets overlapped with the backward pass)
when every rank has a GPU of its own, else through host memory over Tessera's transport (CPU
ranks, or ranks sharing a GPU). Bitwise reproducibility (``--resume``) holds on the CPU with
host gradient sync; PyTorch's CUDA scatter-add is not deterministic.

``--results FILE`` writes per-epoch figures: the epoch time split into waiting for the loader,
forward + backward, gradient all-reduce, optimizer and the rest, the loader's own sampling and
gathering time (overlapped with training), the training thread's host time to issue forward +
backward (``host_forward_backward``: close to the GPU-timed forward + backward when the host,
not the GPU, bounds the step), the partition's load time against the time to read its files,
and on a GPU the device-to-device copy bandwidth measured in the same run; a second plot
(``<plot>-time.png``) draws the split.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
import warnings
from typing import Optional

import numpy as np

try:
    import tessera
except ImportError:  # running from a source tree without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import tessera

import torch
import torch.nn.functional as F

import tessera.distributed as dist
from tessera import _torch_ops
from tessera.metrics import roc_auc
from tessera.nn import GraphSAGE
from tessera.utils import (Progress, check_output_path, commit_id, log, per_rank_batch,
                           pick_device, pyplot, read_partition_files,
                           refuse_other_partitionings, reusable_partitions)


# --- small utilities -------------------------------------------------------------------------
def param_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def batch_digest(seeds, blocks) -> str:
    """A batch's identity: SHA-256 of its seeds, then per block (input layer first) num_dst,
    source nodes, src, dst and edge IDs as int64 bytes; 16 hex digits. ``tessera train
    --batch-digests`` computes the same from its C++ batches."""
    h = hashlib.sha256()

    def put(t):
        h.update(np.ascontiguousarray(torch.as_tensor(t).cpu().numpy(), dtype=np.int64).tobytes())

    put(seeds)
    for b in blocks:
        h.update(np.int64(b.num_dst_nodes()).tobytes())
        for t in (b.srcdata[tessera.NID], b.src, b.dst, b.edata[tessera.EID]):
            put(t)
    return h.hexdigest()[:16]


def atomic_save(obj, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # as tessera train does
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(obj, tmp)
    os.replace(tmp, path)


# --- data ------------------------------------------------------------------------------------
def dataset_meta(path: str) -> dict:
    try:
        with open(os.path.join(path, "meta.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def prepare_partitions(args) -> str:
    name = os.path.basename(os.path.normpath(args.dataset))
    out = args.part_dir or os.path.join("out", "partitions",
                                        f"{name}-{args.part_method}-p{args.parts}")
    config = os.path.join(out, f"{name}.json")
    if tessera.get_rank() != 0:  # rank 0 writes the partitions; the others wait for it
        dist.barrier()
        return config
    try:
        return _partition(args, name, out, config)
    finally:
        dist.barrier()


def _partition(args, name: str, out: str, config: str) -> str:
    if not args.repartition and reusable_partitions(config, args.dataset, args.parts,
                                                    symmetrize=not args.no_symmetrize,
                                                    part_method=args.part_method, seed=args.seed):
        print(f"[train] reusing partitions {config}", flush=True)
        return config
    refuse_other_partitionings(out, name)
    t0 = time.time()
    balance = ["train_mask"] if args.parts > 1 and args.part_method == "metis" else None
    tessera.partition_graph(args.dataset, name, args.parts, out, num_hops=1,
                            part_method=args.part_method, balance_ntypes=balance,
                            balance_edges=args.parts > 1, symmetrize=not args.no_symmetrize,
                            seed=args.seed)
    print(f"[train] partitioned {args.dataset} into {args.parts} part(s) in "
          f"{time.time() - t0:.2f}s: {config}", flush=True)
    return config


#: Bytes of float64 rows column_stats holds at a time.
STATS_CHUNK_BYTES = 16 << 20


def column_stats(t, lo: int, hi: int) -> tuple:
    """Mean and standard deviation (float64, population) of every column of the [N, F] feature
    DistTensor ``t``, each rank reading only its rows [lo, hi) and in chunks of
    STATS_CHUNK_BYTES; two all-reduces (collective). Each sum runs row by row in node order,
    as NumPy's ``x.mean(0)`` / ``x.std(0)`` over the whole matrix and tessera train do, so at
    one rank the result is theirs to the bit; the all-reduce adds the ranks' sums in rank
    order."""
    n, f = int(t.shape[0]), int(np.prod(t.shape[1:]))
    rows = max(1, STATS_CHUNK_BYTES // (8 * max(f, 1)))

    def column_sum(term) -> np.ndarray:
        acc = np.zeros((1, f), dtype=np.float64)
        for a in range(lo, hi, rows):
            b = min(a + rows, hi)
            x = np.asarray(t.gather(np.arange(a, b, dtype=np.int64)), dtype=np.float64)
            # accumulate runs strictly in row order, continuing from the sum so far
            acc = np.add.accumulate(np.concatenate([acc, term(x.reshape(b - a, f))]),
                                    axis=0)[-1:]
        return dist.all_reduce(np.ascontiguousarray(acc[0]))

    mean = column_sum(lambda x: x) / max(n, 1)
    var = column_sum(lambda x: np.square(x - mean)) / max(n, 1)
    return mean, np.sqrt(var)


class Features:
    """Input features: read through the DistTensor (``feats(ids)``, for inference) or taken from
    a batch the loader prefetched them into (``feats.of_batch``), with the chosen normalization
    applied on the features' device."""

    prefetch = "feat"  # the node data the loader gathers into blocks[0].srcdata

    def __init__(self, g, mode: str, device: torch.device):
        self.t = g.ndata["feat"]
        self.mode = mode
        if mode == "standard":
            mean, std = column_stats(self.t, *g.local_node_range())
            self.mean = torch.from_numpy(mean.astype(np.float32)).to(device)
            self.std = torch.from_numpy(np.maximum(std, 1e-6).astype(np.float32)).to(device)

    @property
    def dim(self) -> int:
        return int(self.t.shape[1])

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32)
        if self.mode == "row":
            x = x / x.abs().sum(1, keepdim=True).clamp(min=1e-12)
        elif self.mode == "standard":
            x = (x - self.mean) / self.std
        return x

    def __call__(self, ids) -> torch.Tensor:
        return self.normalize(self.t[ids])  # on the device of `ids`

    def of_batch(self, input_nodes, blocks) -> torch.Tensor:
        return self.normalize(blocks[0].srcdata[self.prefetch])


def uniform_of_ids(ids: np.ndarray, dim: int, low: float, high: float) -> np.ndarray:
    """float32 rows [len(ids), dim] uniform over [low, high], element (i, j) a function of
    (ids[i], j) only (splitmix64 of ids[i] * dim + j)."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as the hash wants
        x = ids.astype(np.uint64)[:, None] * np.uint64(dim) + np.arange(dim, dtype=np.uint64)
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return (low + (high - low) * u).astype(np.float32)


class LearnedInputs:
    """Learnable node embeddings instead of input features (DGL's DistEmbedding example):
    rows read per batch from their owners, updated by SparseAdagrad on their owners."""

    def __init__(self, g, dim: int, lr: float, name: str):
        policy = g.get_node_partition_policy()

        def init(shape, dtype):
            # This rank's rows (DistEmbedding's: the trainer's range of a distributed graph,
            # else all), each drawn from its node's input ID: the same start for any
            # partitioning, so --parts M on P ranks trains as P parts do.
            lo = int(policy.offsets()[tessera.get_rank()]) if policy.distributed else 0
            orig = g.orig_nids(np.arange(lo, lo + shape[0], dtype=np.int64))
            rows = np.empty(shape, dtype=np.float32)
            for b in range(0, shape[0], 1 << 16):  # the hash's uint64 temporaries, in chunks
                rows[b:b + (1 << 16)] = uniform_of_ids(orig[b:b + (1 << 16)], shape[1], -0.1, 0.1)
            return torch.from_numpy(rows)

        self.emb = tessera.DistEmbedding(g.num_nodes(), dim, name, part_policy=policy,
                                         init_func=init)
        self.opt = tessera.optim.SparseAdagrad([self.emb], lr=lr)
        self.dim = dim

    prefetch = None  # rows come from the embedding, not the loader

    def __call__(self, ids) -> torch.Tensor:
        return self.emb(ids)

    def of_batch(self, input_nodes, blocks) -> torch.Tensor:
        return self.emb(input_nodes)

    def step(self) -> None:
        self.opt.step()

    def save(self, path: str) -> None:
        self.emb.save(os.path.join(path, "embedding"))
        self.opt.save(os.path.join(path, "optimizer"))

    def load(self, path: str) -> None:
        self.emb.load(os.path.join(path, "embedding"))
        self.opt.load(os.path.join(path, "optimizer"))


def check_embedding_round_trip(inputs: LearnedInputs, path: str) -> None:
    """Saves the embeddings, scrambles this rank's rows, loads them back and compares."""
    local = inputs.emb.weight.local_partition()
    before = local.copy()
    inputs.emb.save(path)
    local[...] = 0.0
    inputs.emb.load(path)
    same = bool(np.array_equal(local, before))
    ok = all(dist.all_gather_object(same))
    if not ok:
        raise RuntimeError(f"embeddings did not round-trip through {path}")
    log(f"[train] embeddings saved to {path} and loaded back: identical on every rank")


def check_split(g, labels: torch.Tensor, split: int, dataset: str) -> None:
    """Refuses (SystemExit, on every rank alike: the masks and labels are global) a split that
    cannot be trained, as tessera train does: no validation or test nodes (the best epoch is
    chosen on the one and reported on the other), or an unlabelled node (label -1,
    data/README.md) among its training, validation or test nodes."""
    nodes = {m: np.nonzero(mask_column(g.ndata[m], split))[0]
             for m in ("train_mask", "val_mask", "test_mask")}
    for m, what in (("val_mask", "validation"), ("test_mask", "test")):
        if len(nodes[m]) == 0:
            raise SystemExit(f"{dataset}: split {split} has no {what} nodes (its {m} column is "
                             "empty)")
    lab = labels.numpy()
    for m, ids in nodes.items():
        bad = ids[lab[ids] < 0]
        if len(bad):
            orig = int(g.orig_nids(bad[:1])[0])
            raise SystemExit(f"{dataset}: node {orig} of {m} (split {split}) is unlabelled "
                             f"(label {int(lab[bad[0]])})")


def mask_column(t, split: int) -> np.ndarray:
    m = t.numpy()
    if m.ndim == 2:
        return np.ascontiguousarray(m[:, split])
    return m


# --- model evaluation --------------------------------------------------------------------------
def metric_of(logits, labels: torch.Tensor, nodes: np.ndarray, kind: str) -> float:
    """Metric over ``nodes``; ``logits`` is a tensor or a DistTensor (rows read from their
    owners, so every rank computes the same figure)."""
    idx = torch.from_numpy(nodes)
    rows = logits[idx].cpu()  # a tensor on the training device, or a DistTensor's host rows
    if kind == "rocauc":
        scores = torch.softmax(rows, 1)[:, 1].numpy()
        y = labels[idx].numpy().astype(bool)
        return roc_auc(scores[y], scores[~y]) * 100.0
    return float((rows.argmax(1) == labels[idx]).float().mean()) * 100.0


# --- training ------------------------------------------------------------------------------------
class StepClock:
    """Where an epoch's time goes on the training thread: waiting for the loader, forward +
    backward, the gradient all-reduce and the optimizer, timed with CUDA events on the compute
    stream (on the CPU, with the wall clock); the events are read once per epoch."""

    PARTS = ("wait", "forward_backward", "all_reduce", "optimizer")

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        self.host = {k: 0.0 for k in self.PARTS}
        self.events = {k: [] for k in self.PARTS}

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def add(self, part: str, start, end) -> None:
        if self.cuda and not isinstance(start, float):
            self.events[part].append((start, end))
        else:
            self.host[part] += end - start

    def totals(self) -> dict:
        if self.cuda:
            torch.cuda.synchronize()
        out = dict(self.host)
        for part, pairs in self.events.items():
            out[part] += sum(a.elapsed_time(b) for a, b in pairs) / 1000.0
        self.reset()
        return out


class StepProfiler:
    """``--profile``: torch.profiler over steps 20-49 of one epoch (from its middle step, and
    fewer, if the epoch is shorter); writes the operator table sorted by GPU time, the GPU's
    busy share of the window (all streams, the loader's too) and the Chrome trace."""

    FIRST, STEPS = 20, 30

    def __init__(self, path: Optional[str], epoch: int, device: torch.device):
        self.path, self.epoch, self.device = path, epoch, device
        self.prof, self.t0, self.steps = None, 0.0, 0

    def at_step(self, epoch: int, step: int, steps: int):
        if self.path is None or epoch != self.epoch:
            return None
        if self.steps >= self.STEPS:  # the window's steps are done
            self.finish()
            return None
        if self.prof is None and step >= min(self.FIRST, steps // 2):
            acts = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                acts.append(torch.profiler.ProfilerActivity.CUDA)
                torch.cuda.synchronize(self.device)
            self.prof = torch.profiler.profile(activities=acts)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.prof.__enter__()
            self.t0 = time.perf_counter()
        if self.prof is not None:
            self.steps += 1
            return self.prof
        return None

    def finish(self) -> None:
        if self.prof is None or self.path is None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - self.t0
        with warnings.catch_warnings():  # torch warns that it clears events between "cycles"
            warnings.simplefilter("ignore")
            self.prof.__exit__(None, None, None)
            avg = self.prof.key_averages()
        by = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        gpu_us = sum(getattr(e, "self_device_time_total", 0.0) for e in avg)
        head = (f"{self.steps} steps in {wall * 1e3:.1f} ms of wall time "
                f"({wall * 1e3 / max(self.steps, 1):.2f} ms/step); GPU kernels "
                f"{gpu_us / 1e3:.1f} ms ({gpu_us / 1e4 / max(wall, 1e-9):.0f}% of the wall)\n")
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            f.write(head)
            f.write(avg.table(sort_by=by, row_limit=60, max_name_column_width=60))
        self.prof.export_chrome_trace(self.path + ".trace.json")
        log(f"[profile] {head.strip()}; table {self.path}")
        self.prof, self.path = None, None


def make_loaders(args, g, sampler, train_mask: np.ndarray, split: int, device) -> list:
    """The split's loaders: this rank's over a distributed-mode graph (global or local batches),
    else the P trainers of a P-part partitioning simulated in this process."""
    book = g.get_partition_book()
    if g.is_distributed:  # one trainer per rank
        if args.batching == "global":
            nids = np.nonzero(train_mask)[0]  # the same on every rank: global batches
        else:
            nids = tessera.node_split(train_mask, book)
        return [tessera.DistNodeDataLoader(
            g, nids, sampler, batch_size=per_rank_batch(args.batch_size), shuffle=True,
            drop_last=False, num_workers=args.num_workers, prefetch=args.prefetch,
            seed=args.seed + 1000 * split, global_order=args.batching == "global",
            device=device)]
    world = args.parts
    return [tessera.DistNodeDataLoader(
        g, tessera.node_split(train_mask, book, rank=r, world_size=world), sampler,
        batch_size=args.batch_size, shuffle=True, drop_last=False, num_workers=args.num_workers,
        prefetch=args.prefetch, seed=args.seed + 1000 * split, device=device)
        for r in range(world)]


class Trainee:
    """What one split trains: the model (``net``; ``model`` is it wrapped in DDP when the
    gradients sync that way), its optimizer, loaders and inputs, the run's record (``run``,
    see run_record) and where the time goes."""

    def __init__(self, args, net, feats, loaders: list, device: torch.device, run: dict):
        self.net, self.feats, self.loaders, self.device = net, feats, loaders, device
        self.run = run
        self.sync = dist.gradient_sync_mode(device, args.grad_sync)
        self.model = dist.data_parallel(net, device, self.sync)  # DDP over NCCL / gloo, or net
        self.comm = (dist.CommTimer(self.model, tessera.get_world_size())
                     if self.sync == "ddp" else None)
        # On a GPU the fused Adam updates every parameter in one kernel (the step is bound by
        # kernel launches, not by arithmetic); on the CPU the default keeps the bits of earlier
        # runs.
        self.opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                                    fused=True if device.type != "cpu" else None)
        self.clock = StepClock(device)
        self.profiler = StepProfiler(args.profile if tessera.get_rank() == 0 else None,
                                     1 if args.epochs > 1 else 0, device)


def run_record(args, g, split: int, metric: str, num_classes: int) -> dict:
    """What a checkpoint must have been made with to be resumed: the dataset and every setting
    that changes what is trained or reported, keyed as the messages name them. Not --epochs or
    --stop-after (a resumed run may go further), nor the outputs, the device, the threads and
    loader threads, --prefetch or --repartition (the same batches and model either way)."""
    feat = g.ndata["feat"]
    run = {"dataset": os.path.basename(os.path.normpath(args.dataset)),
           "node count": g.num_nodes(), "feature width": int(np.prod(feat.shape[1:])),
           "class count": num_classes, "--split": split, "--metric": metric,
           "--parts": args.parts, "--part-method": args.part_method,
           "--no-symmetrize": args.no_symmetrize, "--batching": args.batching,
           "--fanouts": list(args.fanouts), "--batch-size": args.batch_size,
           "--hidden": args.hidden, "--dropout": args.dropout,
           "--input-dropout": args.input_dropout, "--layer-norm": bool(args.layer_norm),
           "--lr": args.lr, "--weight-decay": args.weight_decay, "--feat-norm": args.feat_norm,
           "--embed": args.embed, "--seed": args.seed, "--eval-every": args.eval_every}
    if args.embed:  # the embeddings' optimizer: unused without them
        run["--sparse-lr"] = args.sparse_lr
    return run


class OtherRun(ValueError):
    """A checkpoint made by a run of another dataset or other settings."""


def check_run(ckpt: str, recorded: Optional[dict], run: dict) -> None:
    """Refuses (OtherRun) a checkpoint whose run record differs from this run's, naming every
    item that differs, or that has no record."""
    if recorded is None:
        raise OtherRun(f"{ckpt} records no run settings (written before train_sage.py recorded "
                       "them), so it cannot be told from a checkpoint of another dataset or "
                       "other settings; start again without --resume")

    def shown(v) -> str:
        if isinstance(v, bool):
            return "on" if v else "off"
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v)
        return str(v)

    missing = "(not recorded)"
    differ = [f"the checkpoint was made with {k} {shown(recorded.get(k, missing))}, this run "
              f"has {shown(v)}" for k, v in run.items() if recorded.get(k, missing) != v]
    differ += [f"the checkpoint was made with {k} {shown(v)}, this run has none"
               for k, v in recorded.items() if k not in run]
    if differ:
        raise OtherRun(f"{'; '.join(differ)} ({ckpt} is of another run: resume with its "
                       "settings, or start again without --resume)")


def checkpoint_path(args, split: int) -> Optional[str]:
    """The split's checkpoint file: one per split unless --split names one, one per rank with
    several (every rank keeps its loader position)."""
    ckpt = f"{args.checkpoint}.split{split}" if args.checkpoint and \
        not str(args.split).isdigit() else args.checkpoint
    if ckpt and tessera.get_world_size() > 1:
        ckpt = f"{ckpt}.rank{tessera.get_rank()}"
    return ckpt


def other_checkpoints(args) -> list:
    """Checkpoint files next to --checkpoint (its name, .split<S>, .rank<R> forms) that this run
    would not write: what a run of another world size or --split form wrote."""
    base = args.checkpoint
    folder, stem = os.path.split(base)
    world = tessera.get_world_size()
    split_form = "" if str(args.split).isdigit() else r"\.split\d+"
    out = []
    if not os.path.isdir(folder or "."):
        return out  # a first run: the folder is made by the first save
    for name in sorted(os.listdir(folder or ".")):
        m = re.fullmatch(re.escape(stem) + r"(\.split\d+)?(?:\.rank(\d+))?", name)
        if m is None:
            continue
        ours = re.fullmatch(split_form, m.group(1) or "") is not None and (
            m.group(2) is None if world == 1 else
            m.group(2) is not None and int(m.group(2)) < world)
        if not ours:
            out.append(os.path.join(folder, name))
    return out


def resume(args, ckpt: str, t: Trainee, split: int) -> Optional[dict]:
    """--resume: the split's state from its checkpoint (None when there is none yet: a job
    restarted by its scheduler passes --resume every time). Refused on every rank when the
    ranks disagree: one rank's save was lost (ranks at different epochs, or a checkpoint on
    some ranks only), only files of another world size or --split form exist, a checkpoint is
    of another run (check_run), or a rank cannot read its checkpoint."""
    found, state, error = os.path.exists(ckpt), None, ""
    try:
        if found:
            state = load_checkpoint(ckpt, t)
        elif others := other_checkpoints(args):
            error = (f"--resume: no checkpoint {ckpt} for this run ({tessera.get_world_size()} "
                     f"rank(s), --split {args.split}), but {', '.join(others)} exist(s): "
                     "written by a run of another world size or --split")
    except OtherRun as e:
        error = f"--resume: {e}"
    except Exception as e:  # a rank's unreadable checkpoint fails every rank, not only its own
        error = f"--resume: cannot load {ckpt}: {type(e).__name__}: {e}"
    mine = "no checkpoint" if state is None else f"epoch {state['epoch']}"
    every = dist.all_gather_object((error, mine))
    if error:
        raise SystemExit(f"train_sage.py: {error}")
    for r, (e, _) in enumerate(every):
        if e:
            raise SystemExit(f"train_sage.py: --resume: rank {r} failed: "
                             f"{e.removeprefix('--resume: ')}")
    if any(m != mine for _, m in every):
        each = ", ".join(f"rank {r}: {m}" for r, (_, m) in enumerate(every))
        raise SystemExit(f"train_sage.py: --resume: the ranks' checkpoints of split {split} "
                         f"disagree ({each}); remove them all to start again")
    if found and args.embed:
        t.feats.load(embeddings_path(ckpt, state["epoch"]))
    log(f"[train] split {split}: resumed from {ckpt} at epoch {state['epoch']}" if found else
        f"[train] split {split}: no checkpoint {ckpt} yet: starting at epoch 0")
    return state


def load_checkpoint(ckpt: str, t: Trainee) -> dict:
    """The split's state from ``ckpt``, with the model, optimizer, loaders and random
    generators restored (not the learned inputs: loading them is collective)."""
    c = torch.load(ckpt, weights_only=False, map_location="cpu")
    world = tessera.get_world_size()
    if c.get("world_size", world) != world:  # as tessera train checks (older files lack it)
        raise ValueError(f"written by a run of {c['world_size']} rank(s), this run has {world}")
    check_run(ckpt, c.get("run"), t.run)  # before any of its state is taken
    if any(k.endswith(".bias") and k.count(".") == 2 and k.startswith("layers.")
           for k in c["model"]):  # layers.<i>.bias: SAGEConv's layout before DGL's
        raise OtherRun(f"checkpoint {ckpt} holds SAGEConv's parameters in the layout before "
                       "DGL's (layers.<i>.bias): the optimizer's state does not map onto this "
                       "model; start without --resume")
    t.net.load_state_dict(c["model"])
    t.opt.load_state_dict(c["optimizer"])
    for dl, s in zip(t.loaders, c["loaders"]):
        dl.load_state_dict(s)
    torch.set_rng_state(c["torch_rng"])
    if t.device.type != "cpu" and c.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(c["cuda_rng"], t.device)
    return c["state"]


def embeddings_path(ckpt: str, epoch: int) -> str:
    """The folder of the learned inputs (--embed) and their optimizer's state that go with the
    checkpoint ``ckpt`` of ``epoch``: one per epoch, so that a save cut short before the
    checkpoint is replaced leaves the folder of the epoch the checkpoint holds."""
    return f"{ckpt}.emb.epoch{epoch}"


def save_checkpoint(args, ckpt: str, t: Trainee, state: dict) -> None:
    on_gpu = t.device.type != "cpu"
    if args.embed:
        t.feats.save(embeddings_path(ckpt, state["epoch"]))
    atomic_save({"model": t.net.state_dict(), "optimizer": t.opt.state_dict(),
                 "loaders": [dl.state_dict() for dl in t.loaders],
                 "torch_rng": torch.get_rng_state(),
                 "cuda_rng": torch.cuda.get_rng_state(t.device) if on_gpu else None,
                 "state": state,
                 "world_size": tessera.get_world_size(), "run": t.run,
                 "args": vars(args)}, ckpt)
    if args.embed:  # the folders of older epochs, now that the checkpoint has moved on
        keep = os.path.basename(embeddings_path(ckpt, state["epoch"]))
        folder, stem = os.path.split(os.path.abspath(ckpt))
        for name in os.listdir(folder):
            if re.fullmatch(re.escape(stem) + r"\.emb\.epoch\d+", name) and name != keep:
                shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def run_steps(args, t: Trainee, split: int, epoch: int) -> dict:
    """One epoch's steps: the loss (the mean over every rank's steps), the step count, the time
    split (without "other"), the loaders' busy time, the host time of forward + backward and
    this rank's batch digests (--batch-digests)."""
    t.model.train()
    clock, device = t.clock, t.device
    iters = [iter(dl) for dl in t.loaders]
    steps = max(len(dl) for dl in t.loaders)
    bar = Progress(steps, f"split {split} epoch {epoch:3d}",
                   enabled=not args.quiet and tessera.get_rank() == 0)
    log_every = max(1, args.log_every)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    count, loader_busy, shown, host_fb = 0, [0.0, 0.0], float("nan"), 0.0
    digests = []
    for step in range(steps):
        t.profiler.at_step(epoch, step, steps)
        w0 = time.perf_counter()
        batches = [next(it, None) for it in iters]  # the trainers of one synchronous step
        clock.add("wait", w0, time.perf_counter())
        if step < args.batch_digests:
            for dl, batch in zip(t.loaders, batches):
                if batch is not None:
                    index = dl.global_batch_index(dl.batch_index - 1)
                    digests.append(f"{index}:{batch_digest(batch[1], batch[2])}")
        for dl in t.loaders:
            stats = getattr(dl, "last_batch_stats", None)
            if stats is not None:
                loader_busy[0] += stats[0]
                loader_busy[1] += stats[1]
        f0, h0 = clock.mark(), time.perf_counter()
        t.opt.zero_grad(set_to_none=True)
        losses = []
        for batch in batches:
            if batch is None:
                continue
            input_nodes, seeds, blocks = batch
            y = blocks[-1].dstdata["label"].reshape(-1).to(device, torch.int64)
            logits = t.model(blocks, t.feats.of_batch(input_nodes, blocks))
            losses.append(F.cross_entropy(logits, y))
        # The mean over the trainers of one step = the all-reduced mean of their gradients
        # (one trainer: its loss itself, two launches fewer each way).
        loss = losses[0] if len(losses) == 1 else torch.stack(losses).mean()
        loss.backward()
        f1 = clock.mark()
        host_fb += time.perf_counter() - h0
        clock.add("forward_backward", f0, f1)
        if t.sync == "host":
            a0 = time.perf_counter()
            dist.all_reduce_gradients(t.net)  # distributed: the mean over the ranks
            clock.add("all_reduce", a0, time.perf_counter())
        o0 = clock.mark()
        t.opt.step()
        if args.embed:
            t.feats.step()  # sparse: each rank's rows' gradients pushed to their owners
        clock.add("optimizer", o0, clock.mark())
        loss_sum += loss.detach()
        count += 1
        if step % log_every == 0 or step == steps - 1:
            shown = float(loss.detach())  # the only host read of the loss: every log_every steps
        bar.update(shown)
    t.profiler.finish()
    bar.close()
    for it in iters:  # finish the generators so every loader advances to the next epoch
        for _ in it:
            pass
    split_s = clock.totals()
    if t.comm is not None:
        split_s["all_reduce"] += t.comm.seconds()
    sums = dist.all_reduce(np.array([float(loss_sum), count], dtype=np.float64))
    return {"loss": float(sums[0] / max(sums[1], 1)), "steps": count, "split": split_s,
            "loader_sampling": loader_busy[0], "loader_gathering": loader_busy[1],
            "host_forward_backward": host_fb, "digests": digests}


def log_epoch(split: int, metric: str, rec: dict) -> None:
    val = rec["val"]
    shown = f"{val:6.2f}" if val == val else "     -"
    parts = ", ".join(f"{k} {v:.2f}" for k, v in rec["split"].items())
    log(f"split {split} epoch {rec['epoch']:3d}  loss {rec['loss']:.4f}  val {metric} "
        f"{shown}  ({rec['seconds']:.2f}s: {parts}; loader sampling "
        f"{rec['loader_sampling']:.2f}, gathering {rec['loader_gathering']:.2f}"
        + (f"; eval {rec['eval_seconds']:.2f}s)" if val == val else ")"))


def train_split(args, g, feats: Features, labels: torch.Tensor, split: int, metric: str,
                device: torch.device) -> dict:
    on_gpu = device.type != "cpu"
    gpu_path = on_gpu and g.is_distributed and tessera._C.cuda_compiled
    train_mask = mask_column(g.ndata["train_mask"], split)
    val_nodes = np.nonzero(mask_column(g.ndata["val_mask"], split))[0]
    test_nodes = np.nonzero(mask_column(g.ndata["test_mask"], split))[0]
    if args.embed:
        feats = LearnedInputs(g, args.embed, args.sparse_lr, f"{g.graph_name}-emb-split{split}")
    prefetch = [feats.prefetch] if feats.prefetch else []
    # The GPU path samples with the GPU sampler into device memory; the loader gathers the
    # features and labels of every batch there (DGL's prefetch_node_feats / prefetch_labels).
    sampler = tessera.NeighborSampler(args.fanouts, device="cuda" if gpu_path else "cpu",
                                      prefetch_node_feats=prefetch, prefetch_labels=["label"])
    # The loaders move blocks and IDs to the GPU.
    loaders = make_loaders(args, g, sampler, train_mask, split, device if on_gpu else None)

    torch.manual_seed(args.seed + split)
    num_classes = int(labels.max()) + 1
    net = GraphSAGE(feats.dim, args.hidden, num_classes, num_layers=len(args.fanouts),
                    dropout=args.dropout, input_dropout=args.input_dropout,
                    norm="layer" if args.layer_norm else None).to(device)
    dist.broadcast_parameters(net)  # same seed gives the same init; made certain here
    t = Trainee(args, net, feats, loaders, device,
                run_record(args, g, split, metric, num_classes))
    state = {"epoch": 0, "history": [], "best_val": -math.inf, "best_epoch": -1,
             "test_at_best": float("nan")}
    ckpt = checkpoint_path(args, split)
    if ckpt and args.resume:
        state = resume(args, ckpt, t, split) or state

    last_eval = None  # (epoch, logits, seconds) of the latest evaluation
    while state["epoch"] < args.epochs:
        epoch = state["epoch"]
        t0 = time.time()
        rec = run_steps(args, t, split, epoch)
        digests = rec.pop("digests")
        epoch_s = time.time() - t0
        val = float("nan")
        e0 = time.time()
        if (epoch + 1) % args.eval_every == 0 or epoch == args.epochs - 1:
            logits = net.inference(g, feats, args.eval_batch_size)
            last_eval = (epoch, logits, time.time() - e0)
            val = metric_of(logits, labels, val_nodes, metric)
            if val > state["best_val"]:
                state.update(best_val=val, best_epoch=epoch,
                             test_at_best=metric_of(logits, labels, test_nodes, metric))
        eval_s = time.time() - e0
        split_s = rec["split"]
        split_s["other"] = max(0.0, epoch_s - sum(split_s.values()))
        rec = {"epoch": epoch, "loss": rec["loss"], "val": val, "seconds": epoch_s,
               "eval_seconds": eval_s, **{k: v for k, v in rec.items() if k != "loss"}}
        if args.batch_digests:  # every rank's, by global batch index
            rec["batch_digests"] = sorted(
                sum(dist.all_gather_object(digests), []), key=lambda d: int(d.split(":")[0]))
        state["history"].append(rec)
        state["epoch"] = epoch + 1
        if not args.quiet or epoch == args.epochs - 1:
            log_epoch(split, metric, rec)
        if ckpt:
            save_checkpoint(args, ckpt, t, state)
        if args.stop_after is not None and state["epoch"] >= args.stop_after \
                and state["epoch"] < args.epochs:
            log(f"[train] split {split}: stopping after epoch {epoch} (--stop-after)")
            return {"stopped": True, **state}

    if last_eval is not None and last_eval[0] == args.epochs - 1:
        _, logits, inference_s = last_eval  # the last epoch evaluated the final parameters
    else:  # resumed after the last epoch
        t_inf = time.time()
        logits = net.inference(g, feats, args.eval_batch_size)
        inference_s = time.time() - t_inf
    final_test = metric_of(logits, labels, test_nodes, metric)
    if args.embed and args.save_embeddings:
        check_embedding_round_trip(feats, os.path.join(args.save_embeddings, f"split{split}"))
    digest = param_digest(net)
    digests = dist.all_gather_object(digest)
    if len(set(digests)) != 1:
        raise RuntimeError(f"split {split}: the ranks' parameters differ: {digests}")
    log(f"split {split}: best val {metric} {state['best_val']:.2f} at epoch "
        f"{state['best_epoch']}, test {metric} {state['test_at_best']:.2f} "
        f"(last epoch: {final_test:.2f}); parameters {digest}"
        + (f" (identical on {len(digests)} ranks)" if len(digests) > 1 else "")
        + f"; inference over all nodes {inference_s:.2f}s; gradients: {t.sync}")
    return {"stopped": False, "final_test": final_test, "digest": digest,
            "inference_seconds": inference_s, "grad_sync": t.sync, **state}


def copy_bandwidth_gbps(device: torch.device):
    """The device-to-device copy bandwidth of this GPU (GB/s of bytes read plus written, median
    of 10 copies of 1 GiB, timed with CUDA events); None on the CPU."""
    if device.type != "cuda":
        return None
    a = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    del a, b
    return 2 * (1 << 30) / sorted(times)[len(times) // 2] / 1e9


def plot_time(results: dict, path: str, copy_gbps) -> None:
    """Per epoch, where the training thread's time went (stacked), next to the loader's
    sampling and gathering time on its own streams and threads."""
    plt = pyplot("train")
    if plt is None:
        return
    r = next(iter(results.values()))
    hist = r["history"]
    ep = np.arange(len(hist))
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = np.zeros(len(hist))
    for part in ("wait", "forward_backward", "all_reduce", "optimizer", "other"):
        v = np.array([h["split"].get(part, 0.0) for h in hist])
        ax.bar(ep - 0.2, v, 0.4, bottom=bottom, label=part.replace("_", " + " if part ==
                                                                    "forward_backward" else " "))
        bottom += v
    ax.bar(ep + 0.2, [h["loader_sampling"] for h in hist], 0.2, label="loader: sampling",
           color="0.55")
    ax.bar(ep + 0.4, [h["loader_gathering"] for h in hist], 0.2, label="loader: gathering",
           color="0.8")
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    title = "training thread (left) and loader streams (right, overlapped)"
    if copy_gbps:
        title += f"; D2D copy {copy_gbps:.0f} GB/s (read + written)"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"[train] time split: {path}", flush=True)


def plot(results: dict, path: str, metric: str) -> None:
    plt = pyplot("train")
    if plt is None:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for split, r in results.items():
        ep = [h["epoch"] for h in r["history"]]
        a1.plot(ep, [h["loss"] for h in r["history"]], label=f"split {split}")
        ev = [(h["epoch"], h["val"]) for h in r["history"] if h["val"] == h["val"]]
        a2.plot([e for e, _ in ev], [v for _, v in ev], label=f"split {split}")
    a1.set_xlabel("epoch"), a1.set_ylabel("training loss"), a1.set_title("loss")
    a2.set_xlabel("epoch"), a2.set_ylabel(f"validation {metric}"), a2.set_title("validation")
    if len(results) <= 10:
        a1.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"[train] loss curve: {path}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="dataset folder (npy layout) or path")
    p.add_argument("--parts", type=int, default=None,
                   help="partitions (P trainers in one process; under a launcher, a divisor of "
                        "the ranks: one part per machine); default: the number of ranks")
    p.add_argument("--batching", default="global", choices=["global", "split"],
                   help="distributed batches: global (identical for any P) or DGL's node_split")
    p.add_argument("--part-method", default="metis", choices=["metis", "random"])
    p.add_argument("--part-dir", default=None, help="where the partitions go (reused)")
    p.add_argument("--repartition", action="store_true")
    p.add_argument("--no-symmetrize", action="store_true",
                   help="keep edges directed (the shipped datasets store each pair once)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--fanouts", default=None,
                   help="per layer, input layer first: 10,25 (-1: all neighbors, 0: none)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="seeds per optimizer step over all ranks (each of P ranks takes 1/P); "
                        "with --batching global and P dividing it, step s covers exactly the "
                        "seeds of step s at P = 1")
    p.add_argument("--eval-batch-size", type=int, default=32768,
                   help="nodes per batch of the layer-wise full-neighbor inference")
    p.add_argument("--eval-every", type=int, default=None,
                   help="evaluate every k epochs (model selection sees those epochs)")
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--input-dropout", type=float, default=None)
    p.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="layer norm between layers (preset: off for acc, on for rocauc)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--feat-norm", default=None, choices=["none", "row", "standard"])
    p.add_argument("--embed", type=int, default=0, metavar="DIM",
                   help="learn DIM-dimensional node embeddings (DistEmbedding + SparseAdagrad) "
                        "instead of reading the input features")
    p.add_argument("--sparse-lr", type=float, default=0.05, help="SparseAdagrad learning rate")
    p.add_argument("--save-embeddings", default=None,
                   help="with --embed: save the final embeddings here and check they load back")
    p.add_argument("--metric", default="auto", choices=["auto", "acc", "rocauc"])
    p.add_argument("--split", default="0",
                   help="split index of [N, S] masks, a comma-separated list, or 'all'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-workers", type=int, default=1,
                   help="sampler threads per loader (on a GPU each has a CUDA stream of its own)")
    p.add_argument("--prefetch", type=int, default=4, help="batches prepared ahead of training")
    p.add_argument("--log-every", type=int, default=None,
                   help="read the loss back every k steps (default: 1 on the CPU, 20 on a GPU)")
    p.add_argument("--grad-sync", default="auto", choices=["auto", "ddp", "host"],
                   help="gradient all-reduce: ddp (DistributedDataParallel, NCCL on GPUs, gloo "
                        "on CPUs), host (Tessera's transport through host memory) or auto (ddp "
                        "when every rank has a GPU of its own)")
    p.add_argument("--gpu-budget", type=float, default=None,
                   help="GB of GPU memory for the graph structure, labels, features and their "
                        "cache (default: half of the free memory)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    p.add_argument("--device", default="auto",
                   help="auto (cuda when torch sees a GPU, else cpu), cpu, cuda (under a "
                        "launcher cuda:<LOCAL_RANK %% GPUs>) or cuda:N")
    p.add_argument("--checkpoint", default=None, help="checkpoint file (saved every epoch)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--stop-after", type=int, default=None,
                   help="stop after this many epochs (to test --resume)")
    p.add_argument("--plot", default=None,
                   help="loss-curve PNG (default out/<name>-p<parts>-loss.png, <name> the "
                        "dataset folder's name, <parts> the partitions)")
    p.add_argument("--results", default=None, help="write the results as JSON here")
    p.add_argument("--quiet", action="store_true", help="one line per split, no progress bar")
    p.add_argument("--profile", default=None, metavar="PATH",
                   help="profile steps 20-49 of the second epoch (the first if only one) with "
                        "torch.profiler: the operator table (by GPU time) to PATH, the trace "
                        "to PATH.trace.json")
    p.add_argument("--matmul-precision", default="highest", choices=["highest", "high"],
                   help="float32 matmuls: 'high' lets them use TF32 tensor cores on a GPU "
                        "(torch.set_float32_matmul_precision)")
    p.add_argument("--batch-digests", type=int, default=0, metavar="K",
                   help="record digests of the first K batches of every epoch in the results "
                        "(to compare the batches with tessera train's)")
    return p


def split_indices(spec: str, num_splits: Optional[int] = None) -> list:
    """The splits ``spec`` names ("0", "1,3", "all") for masks of ``num_splits`` columns (None:
    the syntax only, "all" then names none); ValueError naming --split otherwise (the
    messages of tessera train's parse_splits). A split listed twice, or an empty item, is
    refused: it trained the split twice, and reported it as two."""
    if spec == "all":
        return list(range(num_splits or 0))
    out = []
    for item in str(spec).split(","):
        if not item.strip():
            raise ValueError(f"--split {spec!r}: an empty item")
        try:
            v = int(item)
        except ValueError:
            raise ValueError(f"--split {spec}: {item!r} is not a split index (give an index, a "
                             "comma-separated list or 'all')") from None
        if v < 0:
            raise ValueError(f"--split {spec}: split {v} is negative")
        if v in out:
            raise ValueError(f"--split {spec!r}: split {v} is listed twice")
        if num_splits is not None and v >= num_splits:
            raise ValueError(f"--split {spec}: split {v} is outside [0, {num_splits}) (the "
                             f"masks have {num_splits} split(s))")
        out.append(v)
    return out


INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1  # num_workers, prefetch and threads are C ints; parts partition_graph's

#: Integer options: (name, least, most). Options the preset fills are None until main.
INT_RANGES = (("epochs", 1, INT64_MAX), ("batch_size", 1, INT64_MAX),
              ("eval_batch_size", 1, INT64_MAX), ("eval_every", 1, INT64_MAX),
              ("hidden", 1, INT64_MAX), ("parts", 1, INT32_MAX),
              ("embed", 0, INT64_MAX),  # 0: read the input features
              ("seed", 0, 2**32 - 1),  # the loaders' seed range
              ("num_workers", 0, INT32_MAX),  # 0: the loader samples on the calling thread
              ("prefetch", 0, INT32_MAX), ("log_every", 1, INT64_MAX),
              ("threads", 0, INT32_MAX),  # 0: torch's default
              ("stop_after", 1, INT64_MAX),  # 0 trained one epoch, as tessera train refuses
              ("batch_digests", 0, INT64_MAX))

#: Float options: (name, check, what the check asks), as tessera train checks them.
FLOAT_RULES = (("dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
               ("input_dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
               ("lr", lambda v: v > 0, "> 0"),
               ("weight_decay", lambda v: v >= 0, ">= 0"),
               ("sparse_lr", lambda v: v > 0, "> 0"),
               ("gpu_budget", lambda v: v > 0, "> 0 (GB)"))


def fanout_list(spec: str) -> list:
    """The per-layer fanouts ``spec`` names ("10,25", input layer first; -1 takes all
    neighbors, 0 none, as the sampler and tessera train take them); ValueError naming
    --fanouts otherwise."""
    out = []
    for item in str(spec).split(","):
        if not item.strip():
            raise ValueError(f"--fanouts {spec!r}: an empty item (give one fanout per layer, "
                             "input layer first: 10,25)")
        try:
            v = int(item)
        except ValueError:
            raise ValueError(f"--fanouts {spec!r}: {item!r} is not an integer") from None
        if v < -1:
            raise ValueError(f"--fanouts {spec!r}: fanout {v} must be >= 0 or -1 (all "
                             "neighbors)")
        if v > INT64_MAX:
            raise ValueError(f"--fanouts {spec!r}: fanout {v} is above 2^63 - 1")
        out.append(v)
    return out


def number_problems(args) -> list:
    """What is wrong with the numeric options given (the presets' values are valid)."""
    problems = []
    for name, least, most in INT_RANGES:
        v = getattr(args, name)
        if v is not None and not least <= v <= most:
            bound = f">= {least}" if v < least else f"<= {most}"
            problems.append(f"--{name.replace('_', '-')} must be {bound}, got {v}")
    for name, ok, wanted in FLOAT_RULES:
        v = getattr(args, name)
        if v is not None and not (math.isfinite(v) and ok(v)):
            finite = "" if math.isfinite(v) else "a finite number "
            problems.append(f"--{name.replace('_', '-')} must be {finite}{wanted}, got {v!r}")
    if args.fanouts is not None:
        try:
            fanout_list(args.fanouts)
        except ValueError as e:
            problems.append(str(e))
    return problems


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    problems = number_problems(args)
    try:
        split_indices(args.split)  # the syntax; the range once the masks are read
    except ValueError as e:
        problems.append(str(e))
    if args.resume and not args.checkpoint:  # it trained from epoch 0 and saved nothing
        problems.append("--resume needs --checkpoint (the file to resume from)")
    if problems:
        p.error("; ".join(problems))
    return args


# Defaults per task: GraphSAGE settings that reach the published figures.
PRESETS = {
    "acc": dict(epochs=100, fanouts="10,25", batch_size=64, hidden=64, dropout=0.5,
                input_dropout=0.0, layer_norm=False, lr=0.01, weight_decay=5e-4,
                feat_norm="row", eval_every=1),
    "rocauc": dict(epochs=40, fanouts="15,10", batch_size=512, hidden=128, dropout=0.2,
                   input_dropout=0.0, layer_norm=True, lr=0.01, weight_decay=0.0,
                   feat_norm="standard", eval_every=4),
}


def main(argv=None) -> int:
    args = parse_args(argv)
    # What the run writes at its end (or after every epoch) is checked before it starts.
    try:
        for option, path, folder in (("--results", args.results, False),
                                     ("--plot", args.plot, False),
                                     ("--checkpoint", args.checkpoint, False),
                                     ("--save-embeddings", args.save_embeddings, True),
                                     ("--profile", args.profile, False)):
            check_output_path(option, path, folder)
    except ValueError as e:
        raise SystemExit(f"train_sage.py: {e}") from None
    meta = dataset_meta(args.dataset)
    metric = args.metric
    if metric == "auto":
        metric = "rocauc" if "ROC" in str(meta.get("metric", "")).upper() else "acc"
    for k, v in PRESETS[metric].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.fanouts = fanout_list(args.fanouts)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision(args.matmul_precision)

    try:
        device = pick_device(args.device)
    except ValueError as e:
        raise SystemExit(f"train_sage.py: {e}") from None
    tessera.initialize()
    world = tessera.get_world_size()
    if not args.threads and world > 1:  # the ranks of this node share its cores (DGL does too)
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))
    if args.parts is None:
        args.parts = world
    if world > 1 and world % args.parts != 0:
        raise SystemExit(f"train_sage.py: --parts {args.parts} under a job of {world} ranks; "
                         "the ranks must be a multiple of the parts (one part per machine, "
                         "the same number of trainers on each)")
    if world == 1 and args.parts > 1:
        print(f"[train] P = {args.parts} in one process (simulated): the {args.parts} trainers "
              "run here; gradients are averaged per step", flush=True)
    config = prepare_partitions(args)
    name = os.path.basename(os.path.normpath(args.dataset))
    machine = tessera.get_rank() // (world // args.parts) if world > 1 else 0
    load = {"files_seconds": read_partition_files(config, machine)}
    t_load = time.time()
    g = tessera.DistGraph(name, part_config=config)
    load["seconds"] = time.time() - t_load
    # What the data cannot serve is refused before any work on it.
    tm = g.ndata["train_mask"]
    nsplits = tm.shape[1] if len(tm.shape) == 2 else 1
    try:
        splits = split_indices(args.split, nsplits)
    except ValueError as e:  # Cora's masks are 1-D: split 0 only
        build_parser().error(str(e))
    labels = torch.from_numpy(np.array(g.ndata["label"].numpy(), dtype=np.int64).reshape(-1))
    classes = int(labels.max()) + 1 if len(labels) else 0
    if metric == "rocauc" and classes > 2:  # class 1 against 0 would drop the others
        build_parser().error(f"--metric rocauc scores two classes; {name} has {classes}"
                             + (" (rocauc was picked from its meta.json)" if args.metric == "auto"
                                else " (use --metric acc)"))
    for s in splits:
        check_split(g, labels, s, args.dataset)
    if args.log_every is None:
        args.log_every = 20 if device.type == "cuda" else 1
    if device.type == "cuda" and g.is_distributed and tessera._C.cuda_compiled:
        budget = None if args.gpu_budget is None else int(args.gpu_budget * 1e9)
        placed = g.place_on_device(["label"] + ([] if args.embed else ["feat"]), budget)
        load["place_seconds"] = placed["seconds"]
        load["placement"] = placed
        log(f"[train] placed on {device}: {placed['describe']} ({placed['seconds']:.2f}s)")
    log(f"[train] loaded partition {tessera.get_rank()} in {load['seconds']:.2f}s (reading its "
        f"files takes {load['files_seconds']:.2f}s)")
    feats = Features(g, args.feat_norm, device)
    log(f"[train] {g}; {world} rank(s) on {device}; {metric}; splits {splits}; "
        f"fanouts {args.fanouts}, "
        f"batch {args.batch_size} ({per_rank_batch(args.batch_size)} per rank), "
        f"hidden {args.hidden}, "
        f"lr {args.lr}, epochs {args.epochs}")

    results = {}
    t0 = time.time()
    for s in splits:
        r = train_split(args, g, feats, labels, s, metric, device)
        if r["stopped"]:
            return 0
        results[s] = r
    tests = np.array([r["test_at_best"] for r in results.values()])
    log(f"[train] test {metric} (at best validation): {tests.mean():.2f} +- "
        f"{tests.std():.2f} over {len(tests)} split(s) "
        f"[{', '.join(f'{t:.2f}' for t in tests)}]; {time.time() - t0:.1f}s")
    if tessera.get_rank() != 0:
        return 0
    plot_path = args.plot or os.path.join("out", f"{name}-p{args.parts}-loss.png")
    plot(results, plot_path, metric)
    if args.results:
        copy_gbps = copy_bandwidth_gbps(device)
        plot_time(results, os.path.splitext(plot_path)[0] + "-time.png", copy_gbps)
        with open(args.results, "w") as f:
            json.dump({"dataset": args.dataset, "parts": args.parts, "ranks": world,
                       "commit": commit_id(__file__),
                       "device": str(device),
                       "gpu": torch.cuda.get_device_name(device) if device.type == "cuda"
                       else None,
                       "batching": args.batching, "metric": metric,
                       "mean": float(tests.mean()), "std": float(tests.std()),
                       "load": load, "copy_bound_gbps": copy_gbps,
                       # whether the layers ran as torch operators (tessera._torch_ops)
                       "torch_ops": _torch_ops.why(),
                       "splits": {str(k): dict(r) for k, r in results.items()},
                       "args": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
