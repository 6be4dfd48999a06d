#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
r"""Distributed GraphSAGE node classification, written as DGL's own example
(dgl/examples/distributed/graphsage/node_classification.py, DGL 2.x) is, on Tessera: the
same arguments, the same calls in the same order, the same printouts. It shows what a DGL
user's script needs to run on Tessera.

    export PYTHONPATH=$PWD/python        # or pip install .
    python3 python/examples/dgl_style_partition.py --dataset data/cora --num_parts 2 \
        --undirected --balance_train --balance_edges --output out/dgl_style/cora-p2
    python3 -m tessera launch --nproc-per-node 2 -- python3 python/examples/dgl_style_sage.py \
        --graph_name cora --part_config out/dgl_style/cora-p2/cora.json \
        --num_epochs 60 --num_hidden 64 --batch_size 32 --lr 0.005 --eval_every 10

With a 1-part partitioning the same command without the launcher (or with
``--nproc-per-node 1``) is standalone mode.

Several trainers per machine (DGL's ``num_trainers_per_machine``): the M-part partitioning runs
on M machines with T trainers each, which share their machine's partition in shared memory
(docs/dist.md, "Several trainers per machine"). Here 2 machines x 2 trainers, simulated on one
host (the same token and port for both machines; on real machines ``--master-addr`` is machine
0's address)::

    export TESSERA_JOB_TOKEN=$(openssl rand -hex 16)
    for m in 0 1; do
      python3 -m tessera launch --nnodes 2 --node-rank $m --nproc-per-node 2 \
          --master-port 29533 -- python3 python/examples/dgl_style_sage.py \
          --graph_name cora --part_config out/dgl_style/cora-p2/cora.json --num_epochs 20 &
    done; wait

Every line that differs from DGL's script, and why
---------------------------------------------------
1. The module is ``tessera`` instead of ``dgl``: ``import tessera`` /
   ``import tessera.distributed`` for ``import dgl`` / ``import dgl.distributed`` (2 lines),
   and ``dgl.distributed.initialize``, ``.DistGraph``, ``.DistTensor`` (1 call each),
   ``.node_split`` (7 calls), ``.DistNodeDataLoader`` (2), ``dgl.dataloading.NeighborSampler``
   (2) and ``dgl.NID`` (3) are spelled with ``tessera.`` (17 lines): a rename only, every name
   after the module is DGL's. (``import tessera as dgl`` would leave these 17 lines unchanged.)
2. ``import dgl.nn.pytorch as dglnn`` is ``import tessera.nn as dglnn``: Tessera's layers are
   PyTorch-only, so there is no ``.pytorch`` backend submodule (DGL accepts
   ``import dgl.nn as dglnn`` too).
3. Text only: this docstring, shorter docstrings of the functions in our words, two comments
   reworded (full-neighbor sampling; DistTensor rows on the host), imports in sorted order.

Nothing else differs. These used to differ too and are now provided by Tessera itself:

* ``tessera.distributed.DistTensor((N, dim), th.float32, name, persistent=True)`` without
  ``part_policy``: it now takes the node (or edge) policy of the DistGraph, as DGL's does
  (Tessera asked for ``part_policy=g.get_node_partition_policy()``); re-creating "h" at every
  evaluation attaches to the existing tensor, as in DGL.
* ``block.number_of_dst_nodes()``: DGL's older name of ``num_dst_nodes()`` (added, with
  ``number_of_src_nodes`` / ``number_of_edges``).
* ``blocks[-1].dstdata[dgl.NID]`` / ``blocks[0].srcdata[dgl.NID]``: ``Block.srcdata`` /
  ``dstdata`` / ``edata`` and ``tessera.NID`` / ``EID`` (Tessera had ``block.srcnodes`` /
  ``dstnodes``).
* ``th.distributed.init_process_group(backend="gloo")`` right after ``initialize()`` and the
  ``DistributedDataParallel`` model: ``tessera launch`` gives MASTER_PORT to Tessera's
  rendezvous store, which rank 0 keeps bound, so torch's store failed with "address already in
  use"; ``initialize()`` now hands torch a free port of rank 0 (and sets RANK / WORLD_SIZE /
  MASTER_ADDR / MASTER_PORT in standalone mode), so torch.distributed joins the same job.

Accepted but without effect on Tessera, as in the script: ``--ip_config`` (the launcher
describes the job), ``--use_graphbolt`` (one sampler), ``--local_rank``, ``--pad-data`` (DGL's
script does not use it either; Tessera's loader always gives every rank the same number of
batches, so ``model.join()`` never has uneven inputs to handle), ``node_trainer_ids`` (only
when the partitioning stores ``trainer_id``, which Tessera's does not).

Not in this script, in the partitioning step (python/examples/dgl_style_partition.py): the
shipped Cora's features are uint8 0/1; the partition step stores them as float32
"features", row-normalized as DGL's CoraGraphDataset serves them, and the labels as "labels",
as DGL's partition_graph.py does.
"""
import argparse
import socket
import time

import numpy as np
import tessera
import tessera.distributed
import tessera.nn as dglnn
import torch as th
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tqdm


class DistSAGE(nn.Module):
    """GraphSAGE for distributed mini-batch training and layer-wise evaluation
    (``in_feats`` -> ``n_hidden`` x (``n_layers`` - 1) -> ``n_classes``)."""

    def __init__(
        self, in_feats, n_hidden, n_classes, n_layers, activation, dropout
    ):
        super().__init__()
        self.n_layers = n_layers
        self.n_hidden = n_hidden
        self.n_classes = n_classes
        self.layers = nn.ModuleList()
        self.layers.append(dglnn.SAGEConv(in_feats, n_hidden, "mean"))
        for _ in range(1, n_layers - 1):
            self.layers.append(dglnn.SAGEConv(n_hidden, n_hidden, "mean"))
        self.layers.append(dglnn.SAGEConv(n_hidden, n_classes, "mean"))
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, blocks, x):
        """Outputs of the seeds of ``blocks[-1]`` from the input rows ``x`` of
        ``blocks[0]``'s source nodes."""
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.activation(h)
                h = self.dropout(h)
        return h

    def inference(self, g, x, batch_size, device):
        """Full-neighbor outputs of every node, one layer at a time: each trainer computes
        its share of the nodes and writes them into a DistTensor per layer, which the next
        layer reads. Returns the last layer's DistTensor."""
        # Split nodes to each trainer.
        nodes = tessera.distributed.node_split(
            np.arange(g.num_nodes()),
            g.get_partition_book(),
            force_even=True,
        )

        for i, layer in enumerate(self.layers):
            # Create DistTensor to save forward results.
            if i == len(self.layers) - 1:
                out_dim = self.n_classes
                name = "h_last"
            else:
                out_dim = self.n_hidden
                name = "h"
            y = tessera.distributed.DistTensor(
                (g.num_nodes(), out_dim),
                th.float32,
                name,
                persistent=True,
            )
            print(f"|V|={g.num_nodes()}, inference batch size: {batch_size}")

            # `-1`: every in-edge (full neighborhood).
            sampler = tessera.dataloading.NeighborSampler([-1])
            dataloader = tessera.distributed.DistNodeDataLoader(
                g,
                nodes,
                sampler,
                batch_size=batch_size,
                shuffle=False,
                drop_last=False,
            )

            for input_nodes, output_nodes, blocks in tqdm.tqdm(dataloader):
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h_dst = h[: block.number_of_dst_nodes()]
                h = layer(block, (h, h_dst))
                if i != len(self.layers) - 1:
                    h = self.activation(h)
                    h = self.dropout(h)
                # DistTensor rows live on the host.
                y[output_nodes] = h.cpu()

            x = y
            # Synchronize trainers.
            g.barrier()
        return x


def compute_acc(pred, labels):
    """Fraction of the rows of ``pred`` whose argmax is the label."""
    labels = labels.long()
    return (th.argmax(pred, dim=1) == labels).float().sum() / len(pred)


def evaluate(model, g, inputs, labels, val_nid, test_nid, batch_size, device):
    """Validation and test accuracy of this trainer's validation and test nodes."""
    model.eval()
    with th.no_grad():
        pred = model.inference(g, inputs, batch_size, device)
    model.train()
    return compute_acc(pred[val_nid], labels[val_nid]), compute_acc(
        pred[test_nid], labels[test_nid]
    )


def run(args, device, data):
    """Trains DistSAGE and evaluates it; returns the mean epoch time and the test
    accuracy."""
    train_nid, val_nid, test_nid, in_feats, n_classes, g = data
    sampler = tessera.dataloading.NeighborSampler(
        [int(fanout) for fanout in args.fan_out.split(",")]
    )
    dataloader = tessera.distributed.DistNodeDataLoader(
        g,
        train_nid,
        sampler,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=False,
    )
    model = DistSAGE(
        in_feats,
        args.num_hidden,
        n_classes,
        args.num_layers,
        F.relu,
        args.dropout,
    )
    model = model.to(device)
    if args.num_gpus == 0:
        model = th.nn.parallel.DistributedDataParallel(model)
    else:
        model = th.nn.parallel.DistributedDataParallel(
            model, device_ids=[device], output_device=device
        )
    loss_fcn = nn.CrossEntropyLoss()
    loss_fcn = loss_fcn.to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    # Training loop.
    iter_tput = []
    epoch = 0
    epoch_time = []
    test_acc = 0.0
    for _ in range(args.num_epochs):
        epoch += 1
        tic = time.time()
        # Various time statistics.
        sample_time = 0
        forward_time = 0
        backward_time = 0
        update_time = 0
        num_seeds = 0
        num_inputs = 0
        start = time.time()
        step_time = []

        with model.join():
            for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
                tic_step = time.time()
                sample_time += tic_step - start
                # Slice feature and label.
                batch_inputs = g.ndata["features"][input_nodes]
                batch_labels = g.ndata["labels"][seeds].long()
                num_seeds += len(blocks[-1].dstdata[tessera.NID])
                num_inputs += len(blocks[0].srcdata[tessera.NID])
                # Move to target device.
                blocks = [block.to(device) for block in blocks]
                batch_inputs = batch_inputs.to(device)
                batch_labels = batch_labels.to(device)
                # Compute loss and prediction.
                start = time.time()
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, batch_labels)
                forward_end = time.time()
                optimizer.zero_grad()
                loss.backward()
                compute_end = time.time()
                forward_time += forward_end - start
                backward_time += compute_end - forward_end

                optimizer.step()
                update_time += time.time() - compute_end

                step_t = time.time() - tic_step
                step_time.append(step_t)
                iter_tput.append(len(blocks[-1].dstdata[tessera.NID]) / step_t)
                if (step + 1) % args.log_every == 0:
                    acc = compute_acc(batch_pred, batch_labels)
                    gpu_mem_alloc = (
                        th.cuda.max_memory_allocated() / 1000000
                        if th.cuda.is_available()
                        else 0
                    )
                    sample_speed = np.mean(iter_tput[-args.log_every :])
                    mean_step_time = np.mean(step_time[-args.log_every :])
                    print(
                        f"Part {g.rank()} | Epoch {epoch:05d} | Step {step:05d}"
                        f" | Loss {loss.item():.4f} | Train Acc {acc.item():.4f}"
                        f" | Speed (samples/sec) {sample_speed:.4f}"
                        f" | GPU {gpu_mem_alloc:.1f} MB | "
                        f"Mean step time {mean_step_time:.3f} s"
                    )
                start = time.time()

        toc = time.time()
        print(
            f"Part {g.rank()}, Epoch Time(s): {toc - tic:.4f}, "
            f"sample+data_copy: {sample_time:.4f}, forward: {forward_time:.4f},"
            f" backward: {backward_time:.4f}, update: {update_time:.4f}, "
            f"#seeds: {num_seeds}, #inputs: {num_inputs}"
        )
        epoch_time.append(toc - tic)

        if epoch % args.eval_every == 0 or epoch == args.num_epochs:
            start = time.time()
            val_acc, test_acc = evaluate(
                model.module,
                g,
                g.ndata["features"],
                g.ndata["labels"],
                val_nid,
                test_nid,
                args.batch_size_eval,
                device,
            )
            print(
                f"Part {g.rank()}, Val Acc {val_acc:.4f}, "
                f"Test Acc {test_acc:.4f}, time: {time.time() - start:.4f}"
            )

    return np.mean(epoch_time[-int(args.num_epochs * 0.8) :]), test_acc


def main(args):
    """Joins the job, loads this trainer's partition, splits the nodes, trains."""
    host_name = socket.gethostname()
    print(f"{host_name}: Initializing DistDGL.")
    tessera.distributed.initialize(args.ip_config, use_graphbolt=args.use_graphbolt)
    print(f"{host_name}: Initializing PyTorch process group.")
    th.distributed.init_process_group(backend=args.backend)
    print(f"{host_name}: Initializing DistGraph.")
    g = tessera.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print(f"Rank of {host_name}: {g.rank()}")

    # Split train/val/test IDs for each trainer.
    pb = g.get_partition_book()
    if "trainer_id" in g.ndata:
        train_nid = tessera.distributed.node_split(
            g.ndata["train_mask"],
            pb,
            force_even=True,
            node_trainer_ids=g.ndata["trainer_id"],
        )
        val_nid = tessera.distributed.node_split(
            g.ndata["val_mask"],
            pb,
            force_even=True,
            node_trainer_ids=g.ndata["trainer_id"],
        )
        test_nid = tessera.distributed.node_split(
            g.ndata["test_mask"],
            pb,
            force_even=True,
            node_trainer_ids=g.ndata["trainer_id"],
        )
    else:
        train_nid = tessera.distributed.node_split(
            g.ndata["train_mask"], pb, force_even=True
        )
        val_nid = tessera.distributed.node_split(
            g.ndata["val_mask"], pb, force_even=True
        )
        test_nid = tessera.distributed.node_split(
            g.ndata["test_mask"], pb, force_even=True
        )
    local_nid = pb.partid2nids(pb.partid).detach().numpy()
    num_train_local = len(np.intersect1d(train_nid.numpy(), local_nid))
    num_val_local = len(np.intersect1d(val_nid.numpy(), local_nid))
    num_test_local = len(np.intersect1d(test_nid.numpy(), local_nid))
    print(
        f"part {g.rank()}, train: {len(train_nid)} (local: {num_train_local}), "
        f"val: {len(val_nid)} (local: {num_val_local}), "
        f"test: {len(test_nid)} (local: {num_test_local})"
    )
    del local_nid
    if args.num_gpus == 0:
        device = th.device("cpu")
    else:
        dev_id = g.rank() % args.num_gpus
        device = th.device("cuda:" + str(dev_id))
    n_classes = args.n_classes
    if n_classes == 0:
        labels = g.ndata["labels"][np.arange(g.num_nodes())]
        n_classes = len(th.unique(labels[th.logical_not(th.isnan(labels))]))
        del labels
    print(f"Number of classes: {n_classes}")

    # Pack data.
    in_feats = g.ndata["features"].shape[1]
    data = train_nid, val_nid, test_nid, in_feats, n_classes, g

    # Train and evaluate.
    epoch_time, test_acc = run(args, device, data)
    print(
        f"Summary of node classification(GraphSAGE): GraphName "
        f"{args.graph_name} | TrainEpochTime(mean) {epoch_time:.4f} "
        f"| TestAccuracy {test_acc:.4f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Distributed GraphSAGE.")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument(
        "--ip_config", type=str, help="The file for IP configuration"
    )
    parser.add_argument(
        "--part_config", type=str, help="The path to the partition config file"
    )
    parser.add_argument(
        "--n_classes", type=int, default=0, help="the number of classes"
    )
    parser.add_argument(
        "--backend",
        type=str,
        default="gloo",
        help="pytorch distributed backend",
    )
    parser.add_argument(
        "--num_gpus",
        type=int,
        default=0,
        help="the number of GPU device. Use 0 for CPU training",
    )
    parser.add_argument("--num_epochs", type=int, default=20)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=100000)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--eval_every", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument(
        "--local_rank", type=int, help="get rank of the process"
    )
    parser.add_argument(
        "--pad-data",
        default=False,
        action="store_true",
        help="Pad train nid to the same length across machine, to ensure num "
        "of batches to be the same.",
    )
    parser.add_argument(
        "--use_graphbolt",
        action="store_true",
        help="Use GraphBolt for distributed train.",
    )
    args = parser.parse_args()
    print(f"Arguments: {args}")
    main(args)
