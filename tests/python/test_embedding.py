# SPDX-License-Identifier: Apache-2.0
"""DistEmbedding and its sparse optimizers in one process: DGL's loop order (zero_grad between
the forward and the backward pass) trains the rows as torch's order does, and an embedding
created again under an existing name shares its trained rows instead of re-initializing them."""
import pytest

from conftest import tessera

torch = pytest.importorskip("torch")


def _train(name: str, order: str, opt_cls) -> "torch.Tensor":
    emb = tessera.DistEmbedding(10, 4, name, init_func=lambda s, d: torch.full(s, 0.5))
    opt = opt_cls([emb], lr=0.1)
    ids = torch.tensor([1, 3, 3])
    w = torch.arange(1.0, 5.0)
    for _ in range(3):
        if order == "torch":
            opt.zero_grad()
        loss = (emb(ids) * w).sum()
        if order == "dgl":
            opt.zero_grad()  # DGL's examples: after the forward pass, before backward
        loss.backward()
        opt.step()
    return emb.weight[torch.arange(10)]


@pytest.mark.parametrize("opt", ["SparseAdagrad", "SparseAdam"])
def test_dgl_loop_order_trains_as_torch_order(opt):
    cls = getattr(tessera.optim, opt)
    a = _train(f"order-torch-{opt}", "torch", cls)
    b = _train(f"order-dgl-{opt}", "dgl", cls)
    assert torch.equal(a, b)
    assert (a[[1, 3]] < 0.5).all() and (a[[0, 2, 4]] == 0.5).all()


def test_zero_grad_drops_gradients_of_a_discarded_forward_pass():
    emb = tessera.DistEmbedding(10, 4, "discarded", init_func=lambda s, d: torch.full(s, 0.5))
    opt = tessera.optim.SparseAdagrad([emb], lr=0.1)
    (emb(torch.tensor([2])).sum()).backward()  # a pass whose gradient is not wanted
    opt.zero_grad()
    (emb(torch.tensor([5])).sum()).backward()
    opt.step()
    rows = emb.weight[torch.arange(10)]
    assert (rows[2] == 0.5).all() and (rows[5] < 0.5).all()


def test_an_embedding_created_again_shares_its_trained_rows():
    first = _train("shared-name", "torch", tessera.optim.SparseAdagrad)
    with pytest.warns(UserWarning, match="'shared-name' exists in this runtime: its rows .* "
                      "are kept and init_func is not applied"):
        again = tessera.DistEmbedding(10, 4, "shared-name",
                                      init_func=lambda s, d: torch.full(s, 0.5))
    assert torch.equal(again.weight[torch.arange(10)], first)
    assert (first[1] < 0.5).all()


def test_only_an_init_func_not_applied_warns():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emb = tessera.DistEmbedding(4, 2, "warns-once", init_func=lambda s, d: torch.ones(s))
        tessera.DistEmbedding(4, 2, "warns-once")  # attaches, no init_func to skip
    del emb
    # The rows outlive the handles: a script re-creating its embedding is told it warm-starts.
    with pytest.warns(UserWarning, match="init_func is not applied"):
        again = tessera.DistEmbedding(4, 2, "warns-once", init_func=lambda s, d: torch.zeros(s))
    assert torch.equal(again.weight[torch.arange(4)], torch.ones(4, 2))


def test_an_optimizer_state_with_a_file_missing_loads_nothing(tmp_path):
    import glob
    import os

    import numpy as np

    emb = tessera.DistEmbedding(10, 4, "adam-load", init_func=lambda s, d: torch.full(s, 0.5))
    opt = tessera.optim.SparseAdam([emb], lr=0.1)
    ids = torch.tensor([1, 3])

    def step():
        opt.zero_grad()
        (emb(ids) * torch.arange(1.0, 5.0)).sum().backward()
        opt.step()

    def state():
        return [np.array(t.local_view(), copy=True) for t in opt._opt[0].state_tensors]

    step()
    opt.save(str(tmp_path / "s"))
    step()
    now = state()
    saved = glob.glob(str(tmp_path / "s" / "*" / "*step*.json"))
    assert len(saved) == 1, os.listdir(tmp_path / "s")
    os.remove(saved[0])
    with pytest.raises(Exception, match="step"):
        opt.load(str(tmp_path / "s"))
    # Nothing replaced: the moments are not the saved ones paired with newer step counts.
    assert all(np.array_equal(a, b) for a, b in zip(state(), now))


def test_an_id_buffer_reused_before_step_updates_the_rows_read():
    emb = tessera.DistEmbedding(6, 2, "reused-ids", init_func=lambda s, d: torch.full(s, 0.5))
    opt = tessera.optim.SparseAdagrad([emb], lr=0.1)
    ids = torch.tensor([0, 1])
    loss = emb(ids).sum()
    ids.copy_(torch.tensor([4, 5]))  # the buffer staged with the next batch's IDs
    loss.backward()
    opt.step()
    rows = emb.weight[torch.arange(6)]
    assert (rows[[0, 1]] < 0.5).all() and (rows[2:] == 0.5).all()


def test_a_mask_selects_rows_only_when_it_has_one_entry_per_row():
    """A 3-entry mask read rows 0-2 of 6, and a 2-D one rows with repeats."""
    emb = tessera.DistEmbedding(6, 2, "mask-ids", init_func=lambda s, d: torch.full(s, 0.5))
    with pytest.raises(ValueError, match="'mask-ids' IDs: a boolean mask of length 3 for 6 rows"):
        emb(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"'mask-ids' IDs: a mask must be 1-D .*shape \(6, 2\)"):
        emb(torch.ones(6, 2, dtype=torch.bool))
    mask = torch.tensor([False, True, False, False, True, False])
    assert torch.equal(emb(mask), emb(torch.tensor([1, 4])))


@pytest.mark.parametrize("twice", ["same object", "same name"])
def test_an_embedding_registered_twice_in_one_optimizer_is_refused(twice):
    emb = tessera.DistEmbedding(4, 2, "registered-twice")
    other = emb if twice == "same object" else tessera.DistEmbedding(4, 2, "registered-twice")
    with pytest.raises(ValueError, match="'registered-twice' already registered"):
        tessera.optim.SparseAdagrad([emb, other], lr=0.1)


@pytest.mark.parametrize("rows", [(3,), (4, 1), (3, 3)])
def test_an_init_func_result_of_another_shape_is_refused(rows):
    # (3,) and (4, 1) would broadcast into the [4, 3] rows; (3, 3) would not fit.
    name = "init-shape-" + "x".join(map(str, rows))
    with pytest.raises(ValueError, match=rf"DistEmbedding '{name}': init_func\(shape, dtype\) "
                       rf"returned shape \({rows[0]},.*\), expected \(4, 3\)"):
        tessera.DistEmbedding(4, 3, name, init_func=lambda s, d: torch.ones(rows))


def test_states_that_would_share_a_folder_are_refused(tmp_path):
    import os

    embs = [tessera.DistEmbedding(3, 2, name) for name in ("u:v", "u_v")]
    opt = tessera.optim.SparseAdagrad(embs, lr=0.1)
    for method in ("save", "load"):
        with pytest.raises(ValueError, match="'u:v' and 'u_v' would share the folder 'u_v'"):
            getattr(opt, method)(str(tmp_path / "s"))
    assert not os.path.exists(tmp_path / "s")  # refused before writing anything


def test_an_embedding_whose_init_failed_is_created_anew():
    import warnings

    def missing(shape, dtype):
        raise OSError("init.npy: no such file")

    with pytest.raises(OSError, match="init.npy: no such file"):
        tessera.DistEmbedding(4, 3, "init-failed", init_func=missing)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # attaching to rows left behind would warn
        emb = tessera.DistEmbedding(4, 3, "init-failed",
                                    init_func=lambda s, d: torch.full(s, 2.0))
    assert torch.equal(emb.weight[torch.arange(4)], torch.full((4, 3), 2.0))


def test_embeddings_whose_files_would_share_names_are_refused(tmp_path):
    # "p:q" and "p_q" both save as p_q.json and p_q.part0.npy.
    a = tessera.DistEmbedding(3, 2, "p:q", init_func=lambda s, d: torch.ones(s))
    b = tessera.DistEmbedding(3, 2, "p_q")
    a.save(str(tmp_path))
    with pytest.raises(ValueError, match="holds the saved DistTensor 'p:q'"):
        b.save(str(tmp_path))
    a.weight[torch.arange(3)] = torch.zeros(3, 2)
    a.load(str(tmp_path))  # what a saved is still there
    assert torch.equal(a.weight[torch.arange(3)], torch.ones(3, 2))


def _two_embeddings(prefix: str, optimizer):
    """Embeddings ``<prefix>-a`` and ``<prefix>-b`` of ones under one ``optimizer``, and a
    function that takes one step touching a row of each."""
    a = tessera.DistEmbedding(6, 2, f"{prefix}-a", init_func=lambda s, d: torch.ones(s))
    b = tessera.DistEmbedding(6, 2, f"{prefix}-b", init_func=lambda s, d: torch.ones(s))
    opt = optimizer([a, b], lr=0.1)

    def step():
        opt.zero_grad()
        (a(torch.tensor([1])).sum() + b(torch.tensor([2])).sum()).backward()
        opt.step()

    return opt, step


def test_an_optimizer_state_of_one_embedding_missing_loads_no_embedding(tmp_path):
    import shutil

    import numpy as np

    opt, step = _two_embeddings("two", tessera.optim.SparseAdam)

    def state():
        return [np.array(t.local_view(), copy=True) for o in opt._opt for t in o.state_tensors]

    step()
    opt.save(str(tmp_path / "s"))
    step()
    now = state()
    shutil.rmtree(tmp_path / "s" / "two-b")  # e.g. a checkpoint of an optimizer over [a] only
    with pytest.raises(OSError, match="two-b_adam_m.json is missing"):
        opt.load(str(tmp_path / "s"))
    # a's state is not the saved one (step 1) beside b's of step 2.
    assert all(np.array_equal(x, y) for x, y in zip(state(), now))
    opt.save(str(tmp_path / "s"))
    step()
    opt.load(str(tmp_path / "s"))  # and a good one still loads both
    assert all(np.array_equal(x, y) for x, y in zip(state(), now))


def test_a_save_cut_short_between_embeddings_is_refused_by_load(tmp_path):
    import numpy as np

    opt, step = _two_embeddings("cut", tessera.optim.SparseAdagrad)

    class DiskFull:  # b's optimizer, whose save fails after a's was written
        def __init__(self, o):
            self.o = o

        def save(self, d):
            raise OSError(f"{d}: no space left on device")

    step()
    opt.save(str(tmp_path / "s"))  # a and b of step 1
    step()
    b_opt, opt._opt[1] = opt._opt[1], DiskFull(opt._opt[1])
    with pytest.raises(OSError, match="no space left"):
        opt.save(str(tmp_path / "s"))  # a of step 2 written over, b still of step 1
    opt._opt[1] = b_opt
    before = [np.array(o.state_tensors[0].local_view(), copy=True) for o in opt._opt]
    with pytest.raises(ValueError, match=r"the state in .* is from a save that did not finish "
                       r"\(.*~optimizer-saving is there\)"):
        opt.load(str(tmp_path / "s"))
    assert all(np.array_equal(o.state_tensors[0].local_view(), x)
               for o, x in zip(opt._opt, before))
    opt.save(str(tmp_path / "s"))  # a save that ends removes the marker
    opt.load(str(tmp_path / "s"))
    assert not (tmp_path / "s" / "~optimizer-saving").exists()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"num_embeddings": 10.7}, TypeError, "'bad-args': num_embeddings must be an integer, got "
     "10.7"),  # was truncated to 10 rows
    ({"num_embeddings": "5"}, TypeError, "num_embeddings must be an integer, got '5'"),
    ({"num_embeddings": -5}, ValueError, "num_embeddings must be >= 0, got -5"),
    ({"embedding_dim": True}, TypeError, "embedding_dim must be an integer, got True"),
    ({"name": 123}, TypeError, "DistEmbedding: name must be a str or None, got 123"),
    ({"init_func": 3}, TypeError, "init_func must be a callable init_func.* got 3"),
    ({"part_policy": "node"}, TypeError, "part_policy must be a DistGraph's partition policy .*"
     "got 'node'"),
])
def test_bad_embedding_arguments_are_named(kwargs, error, message):
    args = {"num_embeddings": 4, "embedding_dim": 2, "name": "bad-args", **kwargs}
    with pytest.raises(error, match=message):
        tessera.DistEmbedding(**args)


@pytest.mark.parametrize("opt, kwargs, message", [
    ("SparseAdam", {"betas": 0.9}, r"SparseAdam: betas must be a pair \(beta1, beta2\), got 0.9"),
    ("SparseAdam", {"betas": (0.9, 0.99, 0.5)}, r"betas must be a pair .*got \(0.9, 0.99, 0.5\)"),
    ("SparseAdam", {"betas": (0.9, None)}, r"SparseAdam: betas\[1\] must be a number, got None"),
    ("SparseAdam", {"eps": None}, "SparseAdam: eps must be a number, got None"),
    ("SparseAdagrad", {"lr": None}, "SparseAdagrad: lr must be a number, got None"),
    ("SparseAdagrad", {"lr": "0.1"}, "SparseAdagrad: lr must be a number, got '0.1'"),
    ("SparseAdagrad", {"initial_accumulator_value": None},
     "SparseAdagrad: initial_accumulator_value must be a number, got None"),
])
def test_bad_optimizer_arguments_are_named(opt, kwargs, message):
    emb = tessera.DistEmbedding(4, 2, "bad-opt-args")
    with pytest.raises(TypeError, match=message):
        getattr(tessera.optim, opt)([emb], **kwargs)
    with pytest.raises(TypeError, match=f"{opt}: lr must be a number, got None"):
        getattr(tessera.optim, opt)([emb]).lr = None
