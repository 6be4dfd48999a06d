# SPDX-License-Identifier: Apache-2.0
"""Small helpers of training scripts: rank-0 logging, a progress bar, atomic writes."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Optional

from . import _C, _runtime

__all__ = ["log", "Progress", "atomic_write_json", "per_rank_batch", "local_rank",
           "pick_device", "commit_id", "read_partition_files"]


def log(*a) -> None:
    """Prints on rank 0 only (in data parallelism every rank computes the same figures)."""
    if _runtime.get_rank() == 0:
        print(*a, flush=True)


class Progress:
    """A progress bar over ``total`` steps: tqdm when installed, else one rewritten status line
    on stderr (only the final state when stderr is not a terminal)."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.n, self.enabled = total, desc, 0, enabled
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
            except ImportError:
                pass
        self.t0 = time.time()

    def update(self, loss: float) -> None:
        self.n += 1
        if not self.enabled:
            return
        if self._bar is not None:
            # The postfix shows at tqdm's next timed refresh: refreshing on every call would
            # format and write the bar once per training step (about 17 us of host time).
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
        elif sys.stderr.isatty() or self.n == self.total:
            sys.stderr.write(f"\r{self.desc}: {self.n}/{self.total} batches, loss {loss:.4f}, "
                             f"{time.time() - self.t0:.1f}s")
            if self.n == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def atomic_write_json(obj, path: str) -> None:
    """Writes ``obj`` as JSON to ``path`` through a temporary file and a rename: a reader sees
    the old file or the whole new one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def check_output_path(option: str, path, folder: bool = False) -> None:
    """Checks before any work that an output written at the end of a job can be written (the
    C++ trainer's ``check_output_path``): a file must not be an existing folder, a folder must
    be one if it exists, and the nearest existing ancestor of what is missing must take a new
    file (a probe, removed at once). Raises ValueError naming ``option`` and the path."""
    if not path:
        return
    path = os.fspath(path)
    if os.path.exists(path) and os.path.isdir(path) != folder:
        raise ValueError(f"{option} {path}: " + ("exists and is not a folder" if folder
                                                 else "is a folder, not a file"))
    at = path if folder and os.path.isdir(path) else (os.path.dirname(os.path.abspath(path)))
    while not os.path.exists(at):
        at = os.path.dirname(at)
    if not os.path.isdir(at):
        raise ValueError(f"{option} {path}: {at} is not a folder")
    probe = os.path.join(at, f".tessera-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot write in {at}: {e.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def pyplot(who: str):
    """matplotlib.pyplot on the file-only Agg backend, or None (saying so, prefixed with
    ``[who]``) when matplotlib is not installed: plots are optional."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"[{who}] matplotlib is not installed; no plot", flush=True)
        return None
    return plt


def per_rank_batch(global_batch: int) -> int:
    """Items per rank and step when ``global_batch`` is the batch of one step over all ranks:
    ceil(global_batch / P), so a step trains on as many items at any number of ranks P.
    ValueError for a batch below 1."""
    if int(global_batch) < 1:
        raise ValueError(f"per_rank_batch: the global batch must be >= 1, got {global_batch}")
    return -(-int(global_batch) // _runtime.get_world_size())


def local_rank() -> int:
    """This process's rank among the processes of its node: LOCAL_RANK (tessera launch,
    torchrun), else SLURM_LOCALID or OMPI_COMM_WORLD_LOCAL_RANK, else 0."""
    for var in ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"):
        v = os.environ.get(var)
        if v:
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"{var}={v!r} is not an integer local rank") from None
    return 0


def pick_device(choice: str = "auto"):
    """The torch device of a training script's ``--device``: ``auto`` is ``cuda`` when torch
    sees a GPU, else ``cpu``; ``cuda`` is ``cuda:<local rank % device count>`` (one GPU per
    rank of a node under a launcher), made the current device; ``cuda:N`` is taken as given.
    ValueError for ``cuda`` without a GPU or an unknown choice."""
    import torch

    choice = str(choice)
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if choice == "cuda" or choice.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"--device {choice}: torch sees no CUDA device "
                             f"(torch {torch.__version__}, CUDA {torch.version.cuda})")
        n = torch.cuda.device_count()
        dev = torch.device("cuda", local_rank() % n) if choice == "cuda" else torch.device(choice)
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"--device {choice}: this machine has {n} CUDA device(s)")
        torch.cuda.set_device(dev)
        return dev
    raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {choice!r}")


def commit_id(where: str, dirty: bool = False, missing: str = "unknown") -> str:
    """The commit a script's results record: ``TESSERA_COMMIT`` when set (a copy of the tree
    whose git metadata may not match), else ``git rev-parse --short HEAD`` run in the folder of
    ``where`` (a script's ``__file__``), with ``+dirty`` when ``dirty`` and tracked files are
    modified; ``missing`` when git cannot tell."""
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"]
    import subprocess

    folder = os.path.dirname(os.path.abspath(where))
    try:
        head = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        changed = dirty and subprocess.run(
            ["git", "-C", folder, "status", "--porcelain", "-uno"], capture_output=True,
            text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return missing
    if not head:
        return missing
    return f"{head}+dirty" if changed else head


def reusable_partitions(config: str, dataset: str, num_parts: int,
                        symmetrize: bool = True, part_method: Optional[str] = None,
                        seed: Optional[int] = None) -> bool:
    """Whether a run may reuse the partitioning at ``config`` (an example's cache of the
    dataset's partitioning): False when there is none; True when it partitions ``dataset``
    into ``num_parts`` parts, with ``part_method`` and ``seed`` when given (of several parts),
    and the dataset's files are as they were then (the fingerprint recorded with it);
    ValueError naming what differs otherwise, or when it is the symmetrized graph for a run
    that asks for the stored edges (``symmetrize=False``; a run that symmetrizes may find the
    flag off where the dataset says both directions are stored already). `tessera train`
    applies the same rule."""
    if not os.path.exists(config):
        return False
    with open(config) as f:
        c = json.load(f)
    why = None
    source = (c.get("source") or {}).get("path")
    options = c.get("partition_options") or {}
    if c.get("num_parts") != num_parts:
        why = f"holds {c.get('num_parts')} part(s), this run needs {num_parts}"
    elif not symmetrize and (c.get("build") or {}).get("symmetrize"):
        why = "partitions the symmetrized graph, and --no-symmetrize asks for the stored edges"
    elif source and os.path.exists(source) and os.path.exists(dataset) \
            and not os.path.samefile(source, dataset):
        why = f"partitions {source}, not --dataset {dataset}"
    elif num_parts > 1 and part_method is not None and options.get("method", part_method) \
            != part_method:  # one part is the same whatever the method and seed
        why = (f"was partitioned with --part-method {options['method']}, this run asks for "
               f"{part_method}")
    elif num_parts > 1 and seed is not None and options.get("seed", seed) != seed:
        why = f"was partitioned with --seed {options['seed']}, this run has {seed}"
    elif os.path.exists(dataset):
        recorded = (c.get("source") or {}).get("fingerprint")
        if recorded is None:
            why = ("records no fingerprint of its dataset's files (made by an older Tessera), "
                   "so whether --dataset changed since cannot be told")
        elif recorded != _C.dataset_fingerprint(dataset):
            why = (f"--dataset {dataset} changed since it was partitioned (its files' sizes or "
                   "modification times differ)")
    if why:
        raise ValueError(f"{config}: {why} (give --repartition, or another --part-dir)")
    return True


def refuse_other_partitionings(out: str, name: str) -> None:
    """ValueError when the folder ``out`` holds the partitioning of another dataset (a partition
    config not named ``name``.json), which partitioning ``name`` into it would delete.
    `tessera train` applies the same rule."""
    if not os.path.isdir(out):
        return
    for f in sorted(os.listdir(out)):
        if f != f"{name}.json" and _C.is_partition_config(os.path.join(out, f)):
            raise ValueError(f"{out}: holds {f}, a partitioning of another dataset, which "
                             f"partitioning {name} here would delete (give another --part-dir, "
                             "or remove it)")


def read_partition_files(config: str, part: int) -> float:
    """Seconds to read every file of partition ``part`` of the partitioning ``config`` once
    with plain reads: the floor of loading it (what ``train_sage.py`` and
    ``benchmarks/load_partition.py`` put next to the load time)."""
    with open(config) as f:
        c = json.load(f)
    folder = os.path.join(os.path.dirname(os.path.abspath(config)), c["partitions"][part]["dir"])
    buf = memoryview(bytearray(64 << 20))  # one buffer: no page faults of fresh memory timed
    buf[::4096] = b"\0" * len(buf[::4096])  # its pages touched before the clock starts
    t0 = time.time()
    for name in c["partitions"][part]["files"]:
        with open(os.path.join(folder, name), "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass
    return time.time() - t0
