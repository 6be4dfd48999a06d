# SPDX-License-Identifier: Apache-2.0
"""Short training runs through the example script: sane accuracy, bitwise resume."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from conftest import CORA, REPO  # noqa: E402

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
    with pytest.raises(SystemExit) as e:
        train_sage.main(["--dataset", CORA, "--part-dir", str(tmp_path / "parts"), "--quiet",
                         "--device", "cpu", "--threads", "1", "--epochs", "1",
                         "--plot", str(tmp_path / "loss.png"), *bad])
    assert e.value.code == 2
    assert f"error: {says}" in capsys.readouterr().err
    assert not (tmp_path / "parts").exists()  # refused before partitioning


@pytest.mark.parametrize("split,says,partitioned", [
    # Cora's masks are 1-D: split 0 only. Split 1 used to train split 0 under its name.
    ("1", "--split 1: split 1 is outside [0, 1) (the masks have 1 split(s))", True),
    ("0,3", "--split 0,3: split 3 is outside [0, 1)", True),
    ("1,x", "--split 1,x: 'x' is not a split index", False),  # was a ValueError traceback
    ("-1", "--split -1: split -1 is negative", False),
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
