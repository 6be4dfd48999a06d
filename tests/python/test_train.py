# SPDX-License-Identifier: Apache-2.0
"""Short training runs through the example script: sane accuracy, bitwise resume."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from conftest import CORA, REPO, cora_copy  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "python", "examples"))
import train_sage  # noqa: E402


def _run(tmp_path, *extra):
    res = tmp_path / "res.json"
    argv = ["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
            "--plot", str(tmp_path / "loss.png"), "--results", str(res), "--threads", "1",
            "--device", "cpu", *extra]  # the figures and digests below are the CPU's
    assert train_sage.main(argv) == 0
    import json

    return json.loads(res.read_text()) if res.exists() else None


def test_cora_reaches_a_sane_accuracy_quickly(tmp_path):
    r = _run(tmp_path, "--epochs", "15")
    assert r["mean"] >= 70.0, r["mean"]
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_two_trainers_in_one_process(tmp_path):
    r = _run(tmp_path, "--epochs", "12", "--parts", "2")
    assert r["mean"] >= 65.0, r["mean"]


def test_resume_gives_bitwise_the_same_parameters(tmp_path):
    full = _run(tmp_path / "a", "--epochs", "4", "--checkpoint", str(tmp_path / "a.ckpt"))
    ck = str(tmp_path / "b.ckpt")
    assert _run(tmp_path / "b", "--epochs", "4", "--checkpoint", ck, "--stop-after", "2") \
        is None
    resumed = _run(tmp_path / "b", "--epochs", "4", "--checkpoint", ck, "--resume")
    assert resumed["splits"]["0"]["digest"] == full["splits"]["0"]["digest"]
    # A checkpoint of another world size under this run's name is refused, as tessera train
    # refuses it (it was caught only, if at all, by the loaders' batch counts).
    import torch

    c = torch.load(ck, weights_only=False)
    assert c["world_size"] == 1
    c["world_size"] = 2
    torch.save(c, ck)
    with pytest.raises(SystemExit, match=r"cannot load .*written by a run of 2 rank\(s\), "
                                         r"this run has 1"):
        _run(tmp_path / "b", "--epochs", "4", "--checkpoint", ck, "--resume")


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path):
    """A checkpoint records the dataset and the settings that change what is trained; --resume
    refuses one made otherwise, naming each difference (it trained on from it and reported the
    old run's best validation epoch as this run's)."""
    ck = str(tmp_path / "a.ckpt")
    assert _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--stop-after", "1") is None
    c = torch.load(ck, weights_only=False)
    run = c["run"]
    assert (run["dataset"], run["node count"], run["feature width"], run["class count"]) == \
        ("cora", 2708, 1433, 7)
    assert (run["--lr"], run["--fanouts"], run["--split"], run["--metric"]) == \
        (0.01, [10, 25], 0, "acc")
    with pytest.raises(SystemExit, match=(
            r"--resume: the checkpoint was made with --batch-size 64, this run has 128; the "
            r"checkpoint was made with --lr 0.01, this run has 0.5 \(.*a\.ckpt is of another "
            r"run")):
        _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--resume", "--lr", "0.5",
             "--batch-size", "128")
    with pytest.raises(SystemExit, match="the checkpoint was made with --feat-norm row, this "
                                         "run has standard"):
        _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--resume", "--feat-norm",
             "standard")
    run["node count"] = 3000  # another dataset's
    torch.save(c, ck)
    with pytest.raises(SystemExit, match="--resume: the checkpoint was made with node count "
                                         "3000, this run has 2708 "):
        _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--resume")
    del c["run"]  # written before the record
    torch.save(c, ck)
    with pytest.raises(SystemExit, match="records no run settings"):
        _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--resume")
    # A checkpoint of SAGEConv's layout before DGL's (the bias as layers.<i>.bias, first):
    # the model would load, the optimizer's state by index would not fit it.
    c["run"] = dict(run, **{"node count": 2708})
    old = dict(c, model={k.replace("fc_self.bias", "bias"): v for k, v in c["model"].items()})
    torch.save(old, ck)
    with pytest.raises(SystemExit, match=r"layout before DGL's \(layers.<i>.bias\)"):
        _run(tmp_path, "--epochs", "2", "--checkpoint", ck, "--resume")
    # The same settings, given or from the preset, resume; --epochs may change.
    torch.save(c, ck)
    r = _run(tmp_path, "--epochs", "3", "--checkpoint", ck, "--resume", "--lr", "0.01")
    assert [h["epoch"] for h in r["splits"]["0"]["history"]] == [0, 1, 2]


def test_resume_without_a_checkpoint_of_this_shape(tmp_path, capsys):
    """--resume without a checkpoint yet starts at epoch 0 and says so; with only the files of
    a run of another world size next to it, it is refused, naming them."""
    ck = tmp_path / "a.ckpt"
    # In a folder still to be made (a scheduler's first run): it failed with FileNotFoundError.
    r = _run(tmp_path, "--epochs", "1", "--checkpoint", str(tmp_path / "new" / "a.ckpt"),
             "--resume")
    assert (tmp_path / "new" / "a.ckpt").exists()
    r = _run(tmp_path, "--epochs", "1", "--checkpoint", str(ck), "--resume")
    assert r["splits"]["0"]["epoch"] == 1
    assert f"[train] split 0: no checkpoint {ck} yet: starting at epoch 0" in \
        capsys.readouterr().out
    ck.unlink()
    for rank in (0, 1):  # what a run of 2 ranks wrote
        (tmp_path / f"a.ckpt.rank{rank}").write_bytes(b"")
    with pytest.raises(SystemExit, match=(
            rf"--resume: no checkpoint {ck} for this run \(1 rank\(s\), --split 0\), but "
            rf"{ck}.rank0, {ck}.rank1 exist\(s\): written by a run of another world size")):
        _run(tmp_path, "--epochs", "1", "--checkpoint", str(ck), "--resume")
    assert not ck.exists()


def test_a_partitioning_of_another_graph_is_not_reused(tmp_path):
    """The partition folder caches the dataset's partitioning: one of the symmetrized graph is
    not reused for --no-symmetrize (it trained on 10556 edges instead of 5278), nor one of
    another part count."""
    _run(tmp_path, "--epochs", "1")
    with pytest.raises(ValueError, match="partitions the symmetrized graph, and "
                                         "--no-symmetrize asks for the stored edges"):
        _run(tmp_path, "--epochs", "1", "--no-symmetrize")
    from tessera.utils import reusable_partitions

    config = str(tmp_path / "parts" / "cora.json")
    assert reusable_partitions(config, CORA, 1)
    assert not reusable_partitions(str(tmp_path / "none.json"), CORA, 1)
    with pytest.raises(ValueError, match="holds 1 part"):
        reusable_partitions(config, CORA, 2)
    with pytest.raises(ValueError, match="not --dataset"):
        reusable_partitions(config, str(tmp_path), 1)
    assert _run(tmp_path, "--epochs", "1", "--no-symmetrize", "--repartition")["mean"] > 0


def test_a_partitioning_of_a_changed_dataset_or_another_cut_is_not_reused(tmp_path):
    """A reviewer's cases: labels changed after partitioning trained with the old ones (28.5%
    test accuracy against 62.2% after --repartition), --part-method random --seed 5 reused a
    METIS partitioning, and a --part-dir holding another dataset's partitioning was deleted."""
    import numpy as np

    import tessera
    from tessera.utils import refuse_other_partitionings, reusable_partitions

    ds = cora_copy(tmp_path)
    cfg = tessera.partition_graph(ds, "cora", 2, str(tmp_path / "p"), seed=0)
    assert reusable_partitions(cfg, ds, 2, part_method="metis", seed=0)
    with pytest.raises(ValueError, match="--part-method metis, this run asks for random"):
        reusable_partitions(cfg, ds, 2, part_method="random", seed=0)
    with pytest.raises(ValueError, match="--seed 0, this run has 5"):
        reusable_partitions(cfg, ds, 2, part_method="metis", seed=5)
    label = np.load(os.path.join(ds, "label.npy"))
    np.save(os.path.join(ds, "label.npy"), label[::-1].copy())
    with pytest.raises(ValueError, match="changed since it was partitioned"):
        reusable_partitions(cfg, ds, 2)
    refuse_other_partitionings(str(tmp_path / "p"), "cora")  # its own: fine
    with pytest.raises(ValueError, match="holds cora.json, a partitioning of another dataset"):
        refuse_other_partitionings(str(tmp_path / "p"), "citeseer")
    with pytest.raises(ValueError, match="a partitioning of another dataset"):
        _run(tmp_path, "--epochs", "1", "--part-dir", str(tmp_path / "p"),
             "--dataset", os.path.join(REPO, "data", "citeseer"))
    assert os.path.exists(cfg)


def test_import_without_torch(tmp_path):
    """tessera imports and samples without torch; loaders then yield NumPy arrays."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import tessera, numpy as np\n"
        f"cfg = tessera.partition_graph({CORA!r}, 'cora', 1, {str(tmp_path / 'p')!r}, "
        "symmetrize=True)\n"
        "g = tessera.DistGraph('cora', part_config=cfg)\n"
        "tr = tessera.node_split(g.ndata['train_mask'], g.get_partition_book())\n"
        "dl = tessera.NodeDataLoader(g, tr, tessera.NeighborSampler([2]), batch_size=70)\n"
        "i, s, b = next(iter(dl))\n"
        "assert isinstance(s, np.ndarray) and isinstance(b[0].src, np.ndarray)\n"
        "assert g.ndata['feat'][i].shape[0] == len(i)\n"
        "try:\n    import tessera.nn\nexcept ImportError as e:\n    print('ok', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout and "PyTorch" in out.stdout


@pytest.mark.parametrize("option,path,says", [
    ("--results", "/proc/nope/r.json", "--results /proc/nope/r.json: cannot write in /proc"),
    ("--checkpoint", "{tmp}", "--checkpoint {tmp}: is a folder, not a file"),
    ("--save-embeddings", os.path.join(CORA, "label.npy"), "exists and is not a folder"),
])
def test_outputs_are_checked_before_training(tmp_path, option, path, says):
    # A path that cannot be written fails at once, naming the option, not after the last epoch.
    path, says = path.format(tmp=tmp_path), says.format(tmp=tmp_path)
    with pytest.raises(SystemExit, match=says.replace("/", "/")):
        train_sage.main(["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                         "--device", "cpu", "--epochs", "1", option, path])
    assert not (tmp_path / "parts").exists()  # nothing was partitioned


@pytest.mark.parametrize("bad,says", [
    (["--eval-every", "0"], "--eval-every must be >= 1, got 0"),  # was ZeroDivisionError
    (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),  # was trained at batch 1
    (["--hidden", "0"], "--hidden must be >= 1, got 0"),
    (["--epochs", "0"], "--epochs must be >= 1, got 0"),
    (["--eval-batch-size", "-2"], "--eval-batch-size must be >= 1, got -2"),
])
def test_sizes_below_one_are_one_argparse_error(tmp_path, capsys, bad, says):
    _refused_by_argparse(tmp_path, capsys, bad, says)


def _refused_by_argparse(tmp_path, capsys, bad, says):
    with pytest.raises(SystemExit) as e:
        train_sage.main(["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                         "--device", "cpu", "--threads", "1", "--epochs", "1",
                         "--plot", str(tmp_path / "loss.png"), *bad])
    assert e.value.code == 2
    assert f"error: {says}" in capsys.readouterr().err
    assert not (tmp_path / "parts").exists()  # refused before partitioning


@pytest.mark.parametrize("bad,says", [
    # Each was a traceback: from int(), the C++ binding, torch or the DistTensor, most of them
    # after partitioning.
    (["--fanouts", "10,"], "--fanouts '10,': an empty item"),
    (["--fanouts", "x,5"], "--fanouts 'x,5': 'x' is not an integer"),
    (["--fanouts", "99999999999999999999,5"],
     "--fanouts '99999999999999999999,5': fanout 99999999999999999999 is above 2^63 - 1"),
    (["--fanouts=-2,5"], "--fanouts '-2,5': fanout -2 must be >= 0 or -1 (all neighbors)"),
    (["--dropout", "1.5"], "--dropout must be in [0, 1), got 1.5"),
    (["--dropout=-0.5"], "--dropout must be in [0, 1), got -0.5"),
    (["--input-dropout", "1"], "--input-dropout must be in [0, 1), got 1.0"),
    (["--dropout", "nan"], "--dropout must be a finite number in [0, 1), got nan"),
    (["--lr", "-1"], "--lr must be > 0, got -1.0"),
    (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    (["--weight-decay", "-1"], "--weight-decay must be >= 0, got -1.0"),
    (["--embed", "-4"], "--embed must be >= 0, got -4"),
    (["--sparse-lr", "-1", "--embed", "8"], "--sparse-lr must be > 0, got -1.0"),
    (["--gpu-budget", "0"], "--gpu-budget must be > 0 (GB), got 0.0"),
    (["--parts", "0"], "--parts must be >= 1, got 0"),
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--seed", "4294967296"], "--seed must be <= 4294967295, got 4294967296"),
    (["--prefetch", "-1"], "--prefetch must be >= 0, got -1"),
    (["--prefetch", "9999999999"], "--prefetch must be <= 2147483647, got 9999999999"),
    (["--num-workers", "-1"], "--num-workers must be >= 0, got -1"),
    (["--batch-size", "99999999999999999999"],
     "--batch-size must be <= 9223372036854775807, got 99999999999999999999"),
    (["--log-every", "0"], "--log-every must be >= 1, got 0"),  # was taken as 1
    (["--threads", "-1"], "--threads must be >= 0, got -1"),
    (["--batch-digests", "-1"], "--batch-digests must be >= 0, got -1"),
    # trained one epoch and said "stopping after epoch 0"; tessera train refuses it alike
    (["--stop-after", "0"], "--stop-after must be >= 1, got 0"),
    (["--resume"], "--resume needs --checkpoint (the file to resume from)"),  # was ignored
    (["--lr", "0", "--hidden", "0"], "--hidden must be >= 1, got 0; --lr must be > 0, got 0.0"),
])
def test_bad_numbers_are_one_argparse_error(tmp_path, capsys, bad, says):
    _refused_by_argparse(tmp_path, capsys, bad, says)


def test_fanouts_take_all_or_no_neighbors():
    # As tessera train and the sampler: -1 takes every neighbor, 0 none.
    assert train_sage.fanout_list("-1,0, 25") == [-1, 0, 25]


@pytest.mark.parametrize("split,says,partitioned", [
    # Cora's masks are 1-D: split 0 only. Split 1 used to train split 0 under its name.
    ("1", "--split 1: split 1 is outside [0, 1) (the masks have 1 split(s))", True),
    ("0,3", "--split 0,3: split 3 is outside [0, 1)", True),
    ("1,x", "--split 1,x: 'x' is not a split index", False),  # was a ValueError traceback
    ("-1", "--split -1: split -1 is negative", False),
    # Split 0 was trained twice (and reported "over 1 split(s)"); an empty item is named as
    # tessera train names it.
    ("0,0", "--split '0,0': split 0 is listed twice", False),
    ("0,", "--split '0,': an empty item", False),
    (",0", "--split ',0': an empty item", False),
])
def test_a_split_the_masks_lack_is_one_argparse_error(tmp_path, capsys, split, says,
                                                      partitioned):
    with pytest.raises(SystemExit) as e:
        train_sage.main(["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                         "--device", "cpu", "--threads", "1", "--epochs", "1",
                         "--plot", str(tmp_path / "loss.png"), "--split", split])
    assert e.value.code == 2
    assert f"error: {says}" in capsys.readouterr().err
    assert (tmp_path / "parts").exists() == partitioned  # the syntax is checked first
    assert not (tmp_path / "loss.png").exists()


def test_rocauc_of_more_than_two_classes_is_one_argparse_error(tmp_path, capsys):
    # ROC-AUC of class 1 against class 0 used to leave Cora's classes 2-6 out of the figure.
    with pytest.raises(SystemExit) as e:
        train_sage.main(["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                         "--device", "cpu", "--threads", "1", "--epochs", "1",
                         "--plot", str(tmp_path / "loss.png"), "--metric", "rocauc"])
    assert e.value.code == 2
    assert "error: --metric rocauc scores two classes; cora has 7 (use --metric acc)" in \
        capsys.readouterr().err
    assert not (tmp_path / "loss.png").exists()


def test_layer_norm_preset_can_be_turned_off():
    # --layer-norm was store_true: the rocauc preset's layer norm could not be turned off.
    args = train_sage.parse_args(["--dataset", CORA, "--no-layer-norm"])
    assert args.layer_norm is False
    assert train_sage.parse_args(["--dataset", CORA, "--layer-norm"]).layer_norm is True
    assert train_sage.parse_args(["--dataset", CORA]).layer_norm is None  # the preset's


def test_per_rank_batch_refuses_a_batch_below_one():
    # It used to clamp to 1, so a --batch-size 0 trained one item per step.
    from tessera.utils import per_rank_batch

    assert per_rank_batch(1) == 1 and per_rank_batch(64) == 64
    for bad in (0, -3):
        with pytest.raises(ValueError, match=f"global batch must be >= 1, got {bad}"):
            per_rank_batch(bad)


def _wide_range_dataset(folder, n=300, f=5, seed=4):
    """Features whose float64 column sums depend on the order of the additions."""
    import numpy as np

    rng = np.random.default_rng(seed)
    folder.mkdir()
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, n, (3 * n, 2)) if u != v}
    np.save(folder / "edge_index.npy", np.array(sorted(pairs), dtype=np.int64).T.copy())
    x = rng.standard_normal((n, f)) * 10.0 ** rng.integers(-3, 6, (n, f))
    np.save(folder / "feat.npy", x.astype(np.float32))
    np.save(folder / "label.npy", rng.integers(0, 2, n).astype(np.int64))
    for name, lo, hi in (("train", 0, 100), ("val", 100, 200), ("test", 200, n)):
        m = np.zeros(n, dtype=bool)
        m[lo:hi] = True
        np.save(folder / f"{name}_mask.npy", m)
    return str(folder)


def _numpy_stats(t):
    """The statistics as the whole-matrix NumPy code (and tessera train) compute them."""
    import numpy as np

    x = t.numpy().astype(np.float64)
    return x.mean(0).astype(np.float32), np.maximum(x.std(0), 1e-6).astype(np.float32)


@pytest.mark.parametrize("parts", [1, 2])  # 2: simulated mode, both parts in this process
def test_standard_statistics_read_chunks_and_keep_the_bits(tmp_path, monkeypatch, parts):
    # Every rank used to read the whole feature matrix as float64 (N x F per rank).
    import numpy as np

    import tessera

    data = _wide_range_dataset(tmp_path / "wide")
    config = tessera.partition_graph(data, "wide", parts, tmp_path / "p", symmetrize=True)
    tessera.initialize()
    g = tessera.DistGraph("wide", part_config=config)
    t = g.ndata["feat"]
    want_mean, want_std = _numpy_stats(t)
    x = t.numpy().astype(np.float64)
    reads = []
    gather = type(t).gather

    def recording_gather(self, ids):
        reads.append(len(np.asarray(ids)))
        return gather(self, ids)

    def no_whole_matrix(self):
        raise AssertionError("the whole feature matrix was read")

    monkeypatch.setattr(type(t), "gather", recording_gather)
    monkeypatch.setattr(type(t), "numpy", no_whole_matrix)
    monkeypatch.setattr(train_sage, "STATS_CHUNK_BYTES", 8 * 5 * 7)  # 7 rows a read
    f = train_sage.Features(g, "standard", torch.device("cpu"))
    assert max(reads) == 7 and sum(reads) == 2 * g.num_nodes()  # two passes
    # Row by row in node order, as before: the same bits. In float64 already, where adding
    # per-chunk sums would differ from NumPy's order in the last bits on these features.
    assert f.mean.numpy().tobytes() == want_mean.tobytes()
    assert f.std.numpy().tobytes() == want_std.tobytes()
    mean, std = train_sage.column_stats(t, 0, g.num_nodes())
    assert mean.tobytes() == x.mean(0).tobytes() and std.tobytes() == x.std(0).tobytes()
    chunked = sum(x[a:a + 7].sum(0) for a in range(0, len(x), 7)) / len(x)
    assert chunked.tobytes() != x.mean(0).tobytes()  # the order matters on these features


@pytest.mark.multiprocess
def test_standard_statistics_on_two_ranks(tmp_path):
    import numpy as np

    import tessera
    from test_distributed import launch

    data = _wide_range_dataset(tmp_path / "wide")
    config = tessera.partition_graph(data, "wide", 2, tmp_path / "p", symmetrize=True)
    tessera.initialize()
    want_mean, want_std = _numpy_stats(tessera.DistGraph("wide", part_config=config)
                                       .ndata["feat"])
    script = os.path.join(REPO, "tests", "python", "dist_scripts", "feature_stats.py")
    launch(2, script, "wide", config, tmp_path).check()
    r = [np.load(tmp_path / f"rank{k}.npz") for k in range(2)]
    for d in r:  # its own rows only, twice, 13 at a time
        lo, hi = int(d["lo"]), int(d["hi"])
        assert int(d["most"]) <= 13
        assert np.array_equal(d["ids"], np.tile(np.arange(lo, hi), 2))
    assert int(r[0]["hi"]) == int(r[1]["lo"]) and int(r[0]["lo"]) == 0
    for k in ("mean", "std"):  # the same bits on every rank
        assert r[0][k].tobytes() == r[1][k].tobytes()
    # The ranks' sums are added in rank order: equal to the whole-matrix figures up to rounding.
    np.testing.assert_allclose(r[0]["mean"], want_mean, rtol=1e-6)
    np.testing.assert_allclose(r[0]["std"], want_std, rtol=1e-6)


def test_splits_it_cannot_train_are_refused_before_training(tmp_path):
    """As tessera train: a split without validation nodes, or with an unlabelled node in its
    training nodes, is one error before any epoch (it trained and reported -inf, or failed in
    the loss)."""
    import numpy as np

    val = np.zeros_like(np.load(os.path.join(CORA, "val_mask.npy")))
    ds = cora_copy(tmp_path / "a", val_mask=val)
    with pytest.raises(SystemExit, match="split 0 has no validation nodes"):
        train_sage.main(["--dataset", ds, "--part-dir", str(tmp_path / "pa"), "--quiet",
                         "--epochs", "1", "--threads", "1", "--device", "cpu"])
    label = np.load(os.path.join(CORA, "label.npy"))
    node = int(np.flatnonzero(np.load(os.path.join(CORA, "train_mask.npy")))[3])
    label[node] = -1
    ds = cora_copy(tmp_path / "b", label=label)
    with pytest.raises(SystemExit, match=f"node {node} of train_mask \\(split 0\\) is unlabelled"):
        train_sage.main(["--dataset", ds, "--part-dir", str(tmp_path / "pb"), "--quiet",
                         "--epochs", "1", "--threads", "1", "--device", "cpu"])


def test_resume_with_embeddings_after_a_save_cut_short(tmp_path):
    """--embed: a run that dies after writing the embeddings of epoch 2 but before its
    checkpoint of epoch 2 resumes from the checkpoint of epoch 1 with the embeddings (and
    their optimizer's state) of epoch 1, bitwise as the run that never stopped."""
    import json

    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(train_sage.tessera.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (pkg_root, os.path.join(REPO, "python", "examples"), env.get("PYTHONPATH"))
        if p)
    # Each run in a process of its own: an embedding's rows outlive main() in its runtime.
    driver = ("import sys, train_sage\n"
              "if sys.argv[1] == 'die':\n"
              "    save, calls = train_sage.atomic_save, []\n"
              "    def dying(obj, path):\n"
              "        calls.append(path)\n"
              "        if len(calls) == 2:\n"
              "            raise SystemExit('killed before the checkpoint of epoch 2')\n"
              "        save(obj, path)\n"
              "    train_sage.atomic_save = dying\n"
              "sys.exit(train_sage.main(sys.argv[2:]))\n")

    def run(name, mode, *extra):
        res = tmp_path / f"{name}.json"
        argv = ["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                "--results", str(res), "--threads", "1", "--device", "cpu", "--embed", "8",
                "--epochs", "3", *extra]
        p = subprocess.run([sys.executable, "-c", driver, mode, *argv], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        return p, (json.loads(res.read_text()) if res.exists() else None)

    p, full = run("full", "run")
    assert p.returncode == 0, p.stderr[-3000:]
    ck = str(tmp_path / "b.ckpt")
    p, _ = run("died", "die", "--checkpoint", ck)
    assert "killed before the checkpoint of epoch 2" in p.stderr, p.stderr[-3000:]
    p, resumed = run("resumed", "run", "--checkpoint", ck, "--resume")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "resumed from" in p.stdout + p.stderr and "at epoch 1" in p.stdout + p.stderr
    assert resumed["splits"]["0"]["digest"] == full["splits"]["0"]["digest"]
