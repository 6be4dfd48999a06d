#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Converts molecules of MDL SD files (V2000 molfiles) into a Tessera graph dataset folder
(docs/partition-format.md, "Graph datasets"): one graph per molecule, atoms as nodes, every bond
as two directed edges.

    python3 scripts/sdf_to_graphs.py --sdf train.sdf:train --sdf test.sdf:test \\
        --label-field SOL_classification --out data/solubility --meta meta.json

* node features (uint8): one-hot element, columns ordered by frequency over all files (ties by
  symbol), then 1 for an atom in an aromatic bond (bond type 4);
* edge features (uint8): the bond type (1 single, 2 double, 3 triple, 4 aromatic);
* graph label (int64): the class index of ``--label-field`` (its values sorted);
* masks: ``<split>_mask`` for each ``FILE:SPLIT``.

A molecule the reader cannot parse is an error naming the file and record.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def read_sdf(path: str, label_field: str) -> list:
    """The molecules of ``path``: dicts with ``atoms`` (symbols), ``bonds`` ([(a, b, type)],
    0-based) and ``label`` (the field's value as a string). Records end at a ``$$$$`` line;
    the first three lines of a record are its header (name, program, comment: any of them may
    be empty) and the fourth the counts line. ValueError naming the file and record for a
    record that does not parse."""
    with open(path) as f:
        text = f.read()
    records, rec = [], []
    for ln in text.split("\n"):
        if ln.rstrip() == "$$$$":
            records.append(rec)
            rec = []
        else:
            rec.append(ln)
    records.append(rec)  # after the last $$$$: only blank lines in a well-formed file
    mols = []
    for i, lines in enumerate(records):
        if not any(ln.strip() for ln in lines):
            continue
        where = f"{path}: record {i + 1}"
        try:
            mols.append(_parse_record(lines, label_field))
        except (ValueError, IndexError) as e:
            raise ValueError(f"{where}: {e}") from None
    return mols


def _parse_record(lines: list, label_field: str) -> dict:
    def line(k: int, what: str) -> str:
        if k >= len(lines):
            raise ValueError(f"ends after {len(lines)} lines, before {what}")
        return lines[k]

    if len(lines) < 4 or "V2000" not in lines[3]:
        raise ValueError("no V2000 counts line (line 4 of the record)")
    counts = lines[3]
    try:
        na, nb = int(counts[0:3]), int(counts[3:6])
    except ValueError:
        raise ValueError(f"counts line {counts.strip()!r}: atoms and bonds are not "
                         "integers") from None
    atoms = []
    for k in range(na):
        ln = line(4 + k, f"atom {k + 1} of {na}")
        fields = ln.split()
        if len(fields) < 4:
            raise ValueError(f"atom {k + 1}: line {ln.strip()!r} has no element symbol")
        atoms.append(fields[3])
    bonds = []
    for k in range(nb):
        ln = line(4 + na + k, f"bond {k + 1} of {nb}")
        try:
            a, b, t = int(ln[0:3]) - 1, int(ln[3:6]) - 1, int(ln[6:9])
        except ValueError:
            raise ValueError(f"bond {k + 1}: line {ln.strip()!r} is not 3 integers "
                             "(atom, atom, type)") from None
        if not (0 <= a < na and 0 <= b < na):
            raise ValueError(f"bond {k + 1} joins atoms {a + 1}, {b + 1} of {na}")
        bonds.append((a, b, t))
    label = None
    for k, ln in enumerate(lines):
        if ln.startswith(">") and f"<{label_field}>" in ln:
            label = line(k + 1, f"the value of <{label_field}>").strip()
    if label is None:
        raise ValueError(f"no field <{label_field}>")
    return {"atoms": atoms, "bonds": bonds, "label": label}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sdf", action="append", required=True, metavar="FILE:SPLIT")
    p.add_argument("--label-field", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--meta", help="JSON file of provenance merged into meta.json")
    p.add_argument("--overwrite", action="store_true")
    a = p.parse_args(argv)
    import tessera.graphs as tg

    files = [s.rsplit(":", 1) if ":" in s else (s, "train") for s in a.sdf]
    mols, split_of = [], []
    for path, split in files:
        m = read_sdf(path, a.label_field)
        mols += m
        split_of += [split] * len(m)
        print(f"{path}: {len(m)} molecules ({split})", flush=True)
    freq = Counter(s for m in mols for s in m["atoms"])
    elements = sorted(freq, key=lambda s: (-freq[s], s))
    col = {s: i for i, s in enumerate(elements)}
    classes = sorted({m["label"] for m in mols})
    graphs = []
    for m in mols:
        n = len(m["atoms"])
        feat = np.zeros((n, len(elements) + 1), dtype=np.uint8)
        feat[np.arange(n), [col[s] for s in m["atoms"]]] = 1
        b = np.array(m["bonds"], dtype=np.int64).reshape(-1, 3)
        for a_, b_, t in m["bonds"]:
            if t == 4:
                feat[[a_, b_], -1] = 1
        ei = np.concatenate([b[:, [0, 1]].T, b[:, [1, 0]].T], axis=1)
        graphs.append({"edge_index": ei, "node_feat": feat,
                       "edge_feat": np.concatenate([b[:, 2], b[:, 2]]).astype(np.uint8),
                       "label": np.int64(classes.index(m["label"]))})
    arrays = tg.graphs_to_arrays(graphs)
    splits = np.array(split_of)
    masks = {f"{s}_mask": splits == s for s in sorted(set(split_of))}
    meta = {}
    if a.meta:
        with open(a.meta) as f:
            try:
                meta = json.load(f)
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
                raise ValueError(f"{a.meta}: not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise ValueError(f"{a.meta}: expected a JSON object of fields (source, license, "
                             f"...), got a {type(meta).__name__}")
    meta.update(num_classes=len(classes), classes=classes,
                node_feat_columns=[f"element={s}" for s in elements] + ["aromatic"],
                edge_feat_columns=["bond type (1 single, 2 double, 3 triple, 4 aromatic)"],
                edges="both directions of every bond stored")
    ds = tg.write_graph_dataset(a.out, masks=masks, meta=meta, overwrite=a.overwrite, **arrays)
    print(f"wrote {a.out}: {ds}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, OSError) as e:
        print(f"sdf_to_graphs.py: error: {e}", file=sys.stderr)
        sys.exit(1)
