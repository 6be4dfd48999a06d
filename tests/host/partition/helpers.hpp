// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the partition tests: small graphs, a partition-and-validate driver.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/core/progress.hpp"
#include "tessera/graph/dataset.hpp"
#include "tessera/partition/format.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/partition/validate.hpp"
#include "tessera_test.hpp"

namespace tessera::test {

/// A finalized dataset from an edge list, with a float feature (row v = {v, -v}), an int64
/// label, a train mask (every third node) and an edge weight (row i = i).
inline Dataset make_dataset(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges,
                            BuildOptions bo = {}, const std::string& name = "toy") {
  Dataset ds;
  ds.name = name;
  ds.format = "test";
  ds.edges.num_nodes = n;
  for (const auto& [s, d] : edges) {
    ds.edges.src.push_back(s);
    ds.edges.dst.push_back(d);
  }
  std::vector<float> feat(static_cast<size_t>(2 * n));
  std::vector<int64_t> label(static_cast<size_t>(n));
  Array train = Array::zeros(DType::kBool, {n});
  for (int64_t v = 0; v < n; ++v) {
    feat[2 * v] = static_cast<float>(v);
    feat[2 * v + 1] = -static_cast<float>(v);
    label[v] = v % 5;
    train.mut_data<uint8_t>()[v] = v % 3 == 0;
  }
  ds.ndata["feat"] = Array::from_vector(std::move(feat), {n, 2});
  ds.ndata["label"] = Array::from_vector(std::move(label));
  ds.ndata["train_mask"] = train;
  std::vector<double> w(edges.size());
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<double>(i);
  ds.edata["weight"] = Array::from_vector(std::move(w));
  finalize(ds, bo);
  return ds;
}

/// Partitions `ds` into `dir` (quietly), validates the result against `ds`, and returns the
/// stats; every violation fails the test.
inline PartitionStats partition_checked(const Dataset& ds, const PartitionOptions& po,
                                        const std::filesystem::path& dir,
                                        const std::string& name = "g") {
  set_quiet(true);
  PhaseTimer timer;
  WriteOptions wo;
  wo.out_dir = dir;
  wo.name = name;
  wo.overwrite = true;
  PartitionStats st = partition_dataset(ds, po, wo, timer);
  const ValidationReport r = validate_partitions(dir / (name + ".json"), &ds);
  EXPECT_TRUE(r.ok()) << [&] {
    std::string s = "partition_checked: " + std::to_string(r.num_errors) + " violations\n";
    for (const auto& e : r.errors)
      s += "  " + e + "\n";
    return s;
  }();
  return st;
}

/// Reads a dataset shipped in data/ (npy or OGB folder) symmetrized: its edges are stored once
/// per undirected pair.
inline Dataset read_real(const std::string& name) {
  ReadOptions ro;
  ro.build.symmetrize = true;
  return read_dataset(dataset(name), Format::kAuto, ro);
}

}  // namespace tessera::test
