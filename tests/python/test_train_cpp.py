# SPDX-License-Identifier: Apache-2.0
"""`tessera train`, the C++ (libtorch) trainer, against the Python example it twins
(python/examples/train_sage.py): the same batches and parameters from the same seed on one CPU
thread, Cora's accuracy at 1 and 2 ranks, exact resume, predictions as .npy, clear errors.

The tool is $TESSERA_TOOL (scripts/test.sh sets it to its build folder's) or build/bin/tessera;
it must be built with -DTESSERA_WITH_TORCH=ON (scripts/test.sh does when torch is installed)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import CORA, REPO, cora_copy  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "python", "examples"))
import train_sage  # noqa: E402

TOOL = os.environ.get("TESSERA_TOOL", os.path.join(REPO, "build", "bin", "tessera"))


@pytest.fixture(scope="module")
def tool():
    assert os.access(TOOL, os.X_OK), (
        f"{TOOL} not found: build the tool with -DTESSERA_WITH_TORCH=ON (or set TESSERA_TOOL)")
    info = subprocess.run([TOOL, "info"], capture_output=True, text=True, timeout=60)
    assert "libtorch trainer" in info.stdout, (
        f"{TOOL} was built without the trainer: reconfigure with -DTESSERA_WITH_TORCH=ON\n"
        + info.stdout)
    return TOOL


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Cora in 1 METIS part, shared by the C++ and the Python runs (the trainers partition on
    first use with the same settings)."""
    return str(tmp_path_factory.mktemp("cora-p1"))


def _train(tool, tmp_path, name, *extra, launch=0, check=True, dataset=CORA):
    res = tmp_path / f"{name}.json"
    argv = [tool, "train", "--dataset", dataset, "--device", "cpu", "--quiet",
            "--results", str(res), "--loss-curve", str(tmp_path / f"{name}.csv"), *extra]
    if launch:
        argv = [tool, "launch", "--nproc-per-node", str(launch), "--", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    if check:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        return json.loads(res.read_text()) if res.exists() else None
    return out


def test_same_batches_losses_and_parameters_as_python(tool, parts, tmp_path):
    """Same seed, --threads 1, CPU: the first batches of every epoch (seed IDs and every
    sampled block) hash the same, the per-epoch losses and the final parameters are equal."""
    common = ["--part-dir", parts, "--threads", "1", "--epochs", "3", "--batch-digests", "3",
              "--seed", "7"]
    py_res = tmp_path / "py.json"
    assert train_sage.main(["--dataset", CORA, "--device", "cpu", "--quiet", "--results",
                            str(py_res), "--plot", str(tmp_path / "py.png"), *common]) == 0
    py = json.loads(py_res.read_text())["splits"]["0"]
    cpp = _train(tool, tmp_path, "cpp", *common)["splits"]["0"]
    assert len(cpp["history"]) == len(py["history"]) == 3
    for e_cpp, e_py in zip(cpp["history"], py["history"]):
        assert len(e_py["batch_digests"]) == 3  # Cora: 140 seeds, batches of 64
        assert e_cpp["batch_digests"] == e_py["batch_digests"], e_cpp["epoch"]
        assert e_cpp["loss"] == pytest.approx(e_py["loss"], rel=1e-5, abs=1e-6)
    # The epochs' batches differ from each other (the loader reshuffles every epoch).
    assert cpp["history"][0]["batch_digests"] != cpp["history"][1]["batch_digests"]
    assert cpp["digest"] == py["digest"]


@pytest.mark.parametrize("ranks", [1, 2])
def test_standard_feature_norm_gives_the_same_parameters_as_python(tool, tmp_path, ranks):
    """--feat-norm standard on features whose column sums depend on the order of the additions:
    both trainers read each rank's own rows in chunks, sum them in node order and the ranks'
    sums in rank order, so the same statistics, hence the same losses and parameters, bit for
    bit, at 1 rank and at 2."""
    from test_train import _wide_range_dataset

    data = _wide_range_dataset(tmp_path / "wide")
    common = ["--part-dir", str(tmp_path / "parts"), "--threads", "1", "--epochs", "3",
              "--seed", "7", "--feat-norm", "standard", "--metric", "acc", "--fanouts", "5,5",
              "--batch-size", "32", "--hidden", "16"]
    py_res = tmp_path / "py.json"
    py_args = ["--dataset", data, "--device", "cpu", "--quiet", "--results", str(py_res),
               "--plot", str(tmp_path / "py.png"), *common]
    if ranks == 1:
        assert train_sage.main(py_args) == 0
    else:
        out = subprocess.run([sys.executable, "-m", "tessera", "launch", "--nproc-per-node",
                              str(ranks), "--", sys.executable, train_sage.__file__, *py_args],
                             capture_output=True, text=True, timeout=900, cwd=tmp_path)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    py = json.loads(py_res.read_text())["splits"]["0"]
    cpp = _train(tool, tmp_path, "cpp", *common, dataset=data,
                 launch=ranks if ranks > 1 else 0)["splits"]["0"]
    assert [e["loss"] for e in cpp["history"]] == [e["loss"] for e in py["history"]]
    assert cpp["digest"] == py["digest"]


def test_cora_accuracy_one_rank_and_predictions(tool, parts, tmp_path):
    pred = tmp_path / "pred"
    r = _train(tool, tmp_path, "one", "--part-dir", parts, "--threads", "1",
               "--save-predictions", str(pred))
    assert r["ranks"] == 1
    # The accuracy target is the mean of three seeds: one seed's test accuracy moves by about a
    # point (standard deviation) with the weights it draws.
    tests = [r["mean"]] + [_train(tool, tmp_path, f"seed{s}", "--part-dir", parts, "--threads",
                                  "1", "--seed", str(s))["mean"] for s in (1, 2)]
    assert np.mean(tests) >= 79.0 and min(tests) >= 76.0, tests
    hist = r["splits"]["0"]["history"]
    assert len(hist) == 100 and hist[-1]["loss"] < hist[0]["loss"] / 3
    assert all(e["loader_sampling"] > 0 for e in hist)  # the loader's sampling time is timed
    # The commit of the sources the tool was built from, though it ran outside the repository.
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    if head and not os.environ.get("TESSERA_COMMIT"):
        assert r["commit"].split("+")[0] == head, (
            f"{TOOL} reports {r['commit']}, the commit it was built from; HEAD is {head}: "
            "rebuild it (cmake --build) after committing")
    curve = (tmp_path / "one.csv").read_text().splitlines()
    assert curve[0] == "split,epoch,loss,val" and len(curve) == 101
    labels = np.load(os.path.join(CORA, "label.npy"))
    test_mask = np.load(os.path.join(CORA, "test_mask.npy")).astype(bool)
    p = np.load(pred / "predictions.npy")
    emb = np.load(pred / "embeddings.npy")
    logits = np.load(pred / "logits.npy")
    assert p.shape == labels.shape and logits.shape == (labels.shape[0], 7)
    assert emb.shape == (labels.shape[0], 64)
    assert (logits.argmax(1) == p).all()
    # The predictions are the final model's: their test accuracy is the run's last-epoch one.
    acc = 100.0 * (p[test_mask] == labels[test_mask]).mean()
    assert acc == pytest.approx(r["splits"]["0"]["final_test"], abs=0.01)


def test_cora_accuracy_two_ranks(tool, tmp_path):
    r = _train(tool, tmp_path, "two", "--part-dir", str(tmp_path / "p2"), "--threads", "1",
               launch=2)
    assert r["ranks"] == 2 and r["splits"]["0"]["grad_sync"] == "host"
    assert r["mean"] >= 79.0, r["mean"]


@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_two_trainers_sharing_one_part_train_as_two_parts(tool, parts, tmp_path, model):
    """One part shared by 2 trainers (DGL's num_trainers_per_machine): the same global batches
    as 2 parts on 2 ranks, so the same parameters, bit for bit, and the same evaluation (GCN
    normalizes by whole-graph degrees, not by what one rank's nodes see)."""
    common = ["--threads", "1", "--epochs", "4", "--model", model]
    shared = _train(tool, tmp_path, "shared", "--part-dir", parts, "--parts", "1", *common,
                    launch=2)
    two = _train(tool, tmp_path, "two-parts", "--part-dir", str(tmp_path / "p2"), *common,
                 launch=2)
    assert shared["ranks"] == two["ranks"] == 2
    a, b = shared["splits"]["0"], two["splits"]["0"]
    assert a["digest"] == b["digest"]
    assert [e["val"] for e in a["history"]] == pytest.approx([e["val"] for e in b["history"]])
    assert a["final_test"] == pytest.approx(b["final_test"])


def test_gcn_learns_cora(tool, parts, tmp_path):
    r = _train(tool, tmp_path, "gcn", "--part-dir", parts, "--threads", "1", "--model", "gcn",
               "--epochs", "20")
    assert r["model"] == "gcn"
    assert r["mean"] >= 70.0, r["mean"]
    # The evaluation is a function of the parameters, not of how its nodes are batched.
    small = _train(tool, tmp_path, "gcn-eval64", "--part-dir", parts, "--threads", "1", "--model",
                   "gcn", "--epochs", "20", "--eval-batch-size", "64")
    a, b = r["splits"]["0"], small["splits"]["0"]
    assert a["digest"] == b["digest"]
    assert [e["val"] for e in a["history"]] == pytest.approx([e["val"] for e in b["history"]])


@pytest.mark.parametrize("ranks", [1, 2])
def test_resume_gives_exactly_the_same_run(tool, tmp_path, ranks):
    p = ["--part-dir", str(tmp_path / "parts"), "--threads", "1", "--epochs", "4"]
    full = _train(tool, tmp_path, "full", *p, "--checkpoint", str(tmp_path / "a.ckpt"),
                  launch=ranks if ranks > 1 else 0)
    ck = str(tmp_path / "b.ckpt")
    stopped = _train(tool, tmp_path, "stop", *p, "--checkpoint", ck, "--stop-after", "2",
                     launch=ranks if ranks > 1 else 0)
    assert stopped is None  # no results for a run stopped early
    resumed = _train(tool, tmp_path, "resumed", *p, "--checkpoint", ck, "--resume",
                     launch=ranks if ranks > 1 else 0)
    a, b = full["splits"]["0"], resumed["splits"]["0"]
    assert b["digest"] == a["digest"]
    assert [e["loss"] for e in b["history"]] == [e["loss"] for e in a["history"]]
    assert [e["val"] for e in b["history"]] == [e["val"] for e in a["history"]]


def test_resume_refuses_ranks_at_different_epochs(tool, tmp_path):
    """A rank whose last save was lost resumes an epoch behind the others: refused on every
    rank, naming each rank's epoch (the ranks trained one epoch on mixed parameters and then
    failed in a mismatched collective)."""
    import shutil

    p = ["--part-dir", str(tmp_path / "parts"), "--threads", "1", "--epochs", "4",
         "--checkpoint", str(tmp_path / "a.ckpt")]
    assert _train(tool, tmp_path, "one", *p, "--stop-after", "1", launch=2) is None
    shutil.copy(tmp_path / "a.ckpt.rank1", tmp_path / "old1")
    assert _train(tool, tmp_path, "two", *p, "--resume", "--stop-after", "2", launch=2) is None
    shutil.copy(tmp_path / "old1", tmp_path / "a.ckpt.rank1")
    out = _train(tool, tmp_path, "bad", *p, "--resume", launch=2, check=False)
    assert out.returncode != 0
    assert "checkpoints of split 0 disagree (rank 0: epoch 2, rank 1: epoch 1)" in (
        out.stdout + out.stderr), out.stdout[-2000:] + out.stderr[-2000:]


def test_resume_without_a_checkpoint_of_this_shape(tool, tmp_path):
    """--resume without a checkpoint yet starts at epoch 0 and says so; with only the files of
    a run of another world size it is refused, naming them."""
    p = ["--part-dir", str(tmp_path / "parts"), "--threads", "1", "--epochs", "2",
         "--checkpoint", str(tmp_path / "a.ckpt"), "--resume"]
    out = _train(tool, tmp_path, "fresh", *p, "--stop-after", "1", check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no checkpoint" in out.stdout and "starting at epoch 0" in out.stdout
    # The partitioning of 1 part is not reused for 2 (it ended in a vector range error).
    out = _train(tool, tmp_path, "two", *p, launch=2, check=False)
    assert out.returncode != 0
    assert "holds 1 part(s), this run needs 2" in out.stdout + out.stderr
    p[1] = str(tmp_path / "parts2")
    out = _train(tool, tmp_path, "two", *p, launch=2, check=False)
    assert out.returncode != 0
    assert "written by a run of another world size or --split" in out.stdout + out.stderr
    assert not (tmp_path / "a.ckpt.rank0").exists()


def test_a_partitioning_of_another_graph_is_not_reused(tool, tmp_path):
    """The partition folder is a cache of the dataset's partitioning: one made from the
    symmetrized graph is not reused for --no-symmetrize, nor one of another dataset folder."""
    p = ["--threads", "1", "--epochs", "1", "--part-dir", str(tmp_path / "p")]
    _train(tool, tmp_path, "sym", *p)
    out = _train(tool, tmp_path, "directed", *p, "--no-symmetrize", check=False)
    assert out.returncode != 0
    assert "partitions the symmetrized graph, and --no-symmetrize asks for the stored edges" in (
        out.stderr + out.stdout)
    out = _train(tool, tmp_path, "other", *p, dataset=cora_copy(tmp_path / "x"), check=False)
    assert out.returncode != 0
    assert "not --dataset" in out.stderr + out.stdout
    # Replacing the folder (it crashed in libtorch's copy of std::filesystem::remove_all).
    assert _train(tool, tmp_path, "again", *p, "--no-symmetrize", "--repartition") is not None
    # Nor one of a dataset changed since (labels changed afterwards trained with the old ones).
    ds = cora_copy(tmp_path / "y")
    q = ["--threads", "1", "--epochs", "1", "--part-dir", str(tmp_path / "q")]
    _train(tool, tmp_path, "first", *q, dataset=ds)
    label = np.load(os.path.join(ds, "label.npy"))
    np.save(os.path.join(ds, "label.npy"), label[::-1].copy())
    out = _train(tool, tmp_path, "changed", *q, dataset=ds, check=False)
    assert out.returncode != 0
    assert "changed since it was partitioned" in out.stderr + out.stdout
    # A folder holding another dataset's partitioning is not replaced (it was deleted).
    out = _train(tool, tmp_path, "citeseer", *q, dataset=os.path.join(REPO, "data", "citeseer"),
                 check=False)
    assert out.returncode != 0
    assert "holds cora.json, a partitioning of another dataset" in out.stderr + out.stdout
    assert (tmp_path / "q" / "cora.json").exists()


def test_resume_refuses_a_checkpoint_of_another_run(tool, tmp_path):
    """A checkpoint of other hyper-parameters (or another dataset) was continued, and the old
    run's best validation reported as this one's."""
    p = ["--threads", "1", "--epochs", "2", "--part-dir", str(tmp_path / "p"),
         "--checkpoint", str(tmp_path / "a.ckpt")]
    assert _train(tool, tmp_path, "stop", *p, "--stop-after", "1") is None
    out = _train(tool, tmp_path, "other", *p, "--resume", "--lr", "0.5", "--batch-size", "7",
                 check=False)
    assert out.returncode != 0
    assert ("was made by another run: --batch-size 64, this run has 7; --lr 0.01, this run has "
            "0.5") in out.stderr + out.stdout
    assert _train(tool, tmp_path, "same", *p, "--resume")["mean"] > 0


def test_resume_of_several_splits(tool, tmp_path):
    """--split all, stopped in split 0: the resumed run finishes split 0 and starts split 1,
    whose missing checkpoint is no other run's (split 0's file is this run's own)."""
    masks = {k: np.stack([np.load(os.path.join(CORA, f"{k}.npy"))] * 2)
             for k in ("train_mask", "val_mask", "test_mask")}
    p = ["--threads", "1", "--epochs", "2", "--split", "all", "--part-dir", str(tmp_path / "p"),
         "--checkpoint", str(tmp_path / "a.ckpt")]
    ds = cora_copy(tmp_path, **masks)
    assert _train(tool, tmp_path, "stop", *p, "--stop-after", "1", dataset=ds) is None
    r = _train(tool, tmp_path, "resumed", *p, "--resume", dataset=ds)
    assert sorted(r["splits"]) == ["0", "1"]


def test_unlabelled_nodes(tool, tmp_path):
    """-1 marks an unlabelled node (data/README.md): trained around, as train_sage.py does;
    refused, naming it, when a split trains or scores it."""
    label = np.load(os.path.join(CORA, "label.npy"))
    train = np.load(os.path.join(CORA, "train_mask.npy"))
    off_split = label.copy()
    off_split[np.flatnonzero(~(train | np.load(os.path.join(CORA, "val_mask.npy"))
                               | np.load(os.path.join(CORA, "test_mask.npy"))))[:50]] = -1
    r = _train(tool, tmp_path, "off", "--threads", "1", "--epochs", "2", "--part-dir",
               str(tmp_path / "p1"), dataset=cora_copy(tmp_path, label=off_split))
    assert r["splits"]["0"]["final_test"] > 0
    in_split = label.copy()
    node = int(np.flatnonzero(train)[3])
    in_split[node] = -1
    ds = cora_copy(tmp_path / "b", label=in_split)
    out = _train(tool, tmp_path, "in", "--threads", "1", "--epochs", "2", "--part-dir",
                 str(tmp_path / "p2"), dataset=ds, check=False)
    assert out.returncode != 0
    assert f"node {node} of train_mask (split 0) is unlabelled" in out.stderr + out.stdout


def test_a_rank_without_training_nodes_under_split_batching_is_refused(tool, tmp_path):
    """One training node, 2 ranks each training on its own: one rank has none. Refused up
    front, naming --batching split (the loader's message named drop_last, which the trainer
    does not set)."""
    d = tmp_path / "tiny"
    d.mkdir()
    n = 6
    np.save(d / "edge_index.npy", np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]], dtype=np.int64))
    np.save(d / "feat.npy", np.arange(n * 4, dtype=np.float32).reshape(n, 4))
    np.save(d / "label.npy", np.arange(n, dtype=np.int64) % 2)
    for name, nodes in (("train_mask", [0]), ("val_mask", [1, 2]), ("test_mask", [3, 4, 5])):
        m = np.zeros(n, dtype=bool)
        m[nodes] = True
        np.save(d / f"{name}.npy", m)
    out = _train(tool, tmp_path, "split", "--threads", "1", "--epochs", "1", "--part-dir",
                 str(tmp_path / "p"), "--part-method", "random", "--batching", "split",
                 launch=2, check=False, dataset=str(d))
    assert out.returncode != 0
    assert "--batching split: rank" in out.stderr and "holds no training node of split 0" in (
        out.stderr), out.stderr[-2000:]


def test_a_split_without_validation_nodes_is_refused(tool, tmp_path):
    val = np.zeros_like(np.load(os.path.join(CORA, "val_mask.npy")))
    out = _train(tool, tmp_path, "noval", "--threads", "1", "--epochs", "2", "--part-dir",
                 str(tmp_path / "p"), dataset=cora_copy(tmp_path, val_mask=val), check=False)
    assert out.returncode != 0
    assert "split 0 has no validation nodes (its val_mask column is empty)" in (
        out.stderr + out.stdout)
    assert not (tmp_path / "noval.json").exists()


@pytest.mark.parametrize("bad, says", [
    (["--model", "gat"], "--model"),
    (["--fanouts", "10,x"], "--fanouts"),
    (["--batch-size", "0"], "--batch-size"),
    (["--resume"], "--resume needs --checkpoint"),
    (["--parts", "3"], "--parts 3 under a job of 1 rank(s)"),
    # Outputs are checked before training, not after the last epoch.
    (["--checkpoint", "/proc/nope/ck"], "--checkpoint /proc/nope/ck: cannot write in /proc"),
    (["--save-predictions", os.path.join(CORA, "label.npy")], "exists and is not a folder"),
    ([], "no/such/folder"),
    # A split the masks lack is refused before partitioning (Cora has one split).
    (["--split", "1,x"], "'x' is not a split index"),
    (["--split", "3"], "split 3 is outside [0, 1)"),
    (["--split", "0,0"], "--split '0,0': split 0 is listed twice"),  # it trained split 0 twice
    (["--split", "0,"], "--split '0,': an empty item"),
    (["--fanouts", "99999999999999999999,5"], "'99999999999999999999' is out of range"),
    (["--metric", "rocauc"], "--metric rocauc scores a binary task, but node data 'label' has 7"),
    # Options that were ignored or changed the model silently.
    (["--fanouts", "10,"], "--fanouts 10,: ends with a comma"),
    (["--fanouts", "10", "5"], "not expected: 5"),  # it said 'launch not found
    (["--parts", "0"], "--parts"),
    (["--grad-sync", "nccl"], "--grad-sync nccl needs the GPU path, and this run trains on cpu"),
    (["--gpu-budget", "5"], "--gpu-budget needs the GPU path"),
])
def test_bad_input_is_one_clear_error(tool, tmp_path, bad, says):
    dataset = str(tmp_path / "no/such/folder") if not bad else CORA
    out = _train(tool, tmp_path, "bad", "--part-dir", str(tmp_path / "p"), *bad, check=False,
                 dataset=dataset)
    assert out.returncode != 0
    assert says in out.stderr + out.stdout
    assert not (tmp_path / "bad.json").exists()
    assert not (tmp_path / "p").exists()  # nothing partitioned


def test_a_dataset_without_what_training_reads_is_refused_before_partitioning(tool, tmp_path):
    """Without label.npy the partition was written, the run then failed, and the next run
    reused the label-less partition; a --part-dir that is a file was named '--out'."""
    ds = cora_copy(tmp_path)
    os.remove(os.path.join(ds, "label.npy"))
    out = _train(tool, tmp_path, "nolabel", "--part-dir", str(tmp_path / "p"), check=False,
                 dataset=ds)
    assert out.returncode != 0
    assert "no node data 'label' (label.npy in an npy folder)" in out.stderr + out.stdout
    assert not (tmp_path / "p").exists()
    (tmp_path / "file").write_text("")
    out = _train(tool, tmp_path, "file", "--part-dir", str(tmp_path / "file"), check=False)
    assert out.returncode != 0
    assert f"--part-dir {tmp_path / 'file'}: exists and is not a folder" in out.stderr + out.stdout


def test_the_default_loss_curve_path_is_checked_before_training(tool, tmp_path):
    """Without --loss-curve the curve goes to out/...; a file named out failed the run after
    its last epoch, and --results was never written."""
    (tmp_path / "out").write_text("")
    out = subprocess.run([tool, "train", "--dataset", CORA, "--device", "cpu", "--quiet",
                          "--epochs", "1", "--part-dir", str(tmp_path / "p"), "--results",
                          str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode != 0
    assert "--loss-curve (default) out/cora-p1-cpp-loss.csv" in out.stderr + out.stdout
    assert not (tmp_path / "p").exists()


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("launcher", ["torchrun", "slurm"])
def test_joins_jobs_started_by_other_launchers(tool, tmp_path, launcher):
    """Two processes started with the variables torchrun (RANK, WORLD_SIZE, ...) or srun
    (SLURM_PROCID, SLURM_NTASKS, ...) sets form one 2-rank job."""
    port = _free_port()
    procs = []
    for r in range(2):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "OMPI_")) and k not in
               ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TESSERA_JOB_TOKEN")}
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TESSERA_JOB_TOKEN="0123456789abcdef0123456789abcdef")
        if launcher == "torchrun":
            env.update(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2")
        else:
            env.update(SLURM_PROCID=str(r), SLURM_NTASKS="2", SLURM_LOCALID=str(r),
                       SLURM_NTASKS_PER_NODE="2")
        argv = [tool, "train", "--dataset", CORA, "--device", "cpu", "--quiet", "--threads", "1",
                "--epochs", "2", "--part-dir", str(tmp_path / "p"), "--results",
                str(tmp_path / "r.json"), "--loss-curve", str(tmp_path / "c.csv")]
        procs.append(subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["ranks"] == 2 and r["splits"]["0"]["grad_sync"] == "host"
