// SPDX-License-Identifier: Apache-2.0
// Saving and loading DistTensors: every rank writes and reads its own rows (one .npy per rank)
// plus one JSON description written by rank 0 (DGL's DistTensor checkpoints of embeddings).
#pragma once

#include <filesystem>
#include <string>

#include "tessera/dist/tensor.hpp"

namespace tessera::dist {

/// The file-name stem of tensor `name` in a save folder: the name with every character outside
/// [A-Za-z0-9_.-] replaced by '_' ("emb:adam_m" -> "emb_adam_m"). The JSON keeps the real name
/// and load checks it, so two names that sanitize alike cannot be mixed up.
std::string sanitized_tensor_name(const std::string& name);

/// Collective: saves `t` into folder `dir` (created if absent). Every rank writes its local rows
/// [lo, hi) as `dir/<stem>.part<rank>.npy` (shape [hi - lo, shape[1:]...], the tensor's dtype);
/// rank 0 then writes `dir/<stem>.json` (format, name, shape, dtype, policy kind and offsets,
/// world size, and each part's file name, byte size and CRC-32). Each file is written to a
/// temporary sibling and renamed, so a reader never sees a half-written file. Returns once every
/// rank's part and the JSON are on disk; when any rank fails, every rank throws (the failing one
/// its own error, the others an IOError naming that rank and its message), nobody hangs. `dir`
/// may be node-local: each rank needs only its part, and only rank 0 the JSON.
void save_dist_tensor(const DistTensor& t, const std::filesystem::path& dir);

/// Collective: loads what save_dist_tensor wrote for a tensor of the same name into `t`'s local
/// rows. Rank 0 reads the JSON and shares it; every rank checks it against `t` (name, shape,
/// dtype, row ownership offsets, hence world size) and reads its part into a buffer, checking
/// the part's CRC-32, shape and dtype. Only when every rank succeeded are the rows copied into
/// local_data() (so a failed load changes nothing), followed by a barrier: when load returns,
/// every rank's rows are loaded. Refuses with ValueError naming the file and the field that
/// differs (e.g. `... emb.json: shape [100, 9] differs from the tensor's [100, 8]`), or a missing
/// / corrupt file (IOError / ValueError naming it); one rank's failure fails every rank, naming
/// it. Loading into a different partitioning of the rows (another world size) is not supported.
void load_dist_tensor(DistTensor& t, const std::filesystem::path& dir);

}  // namespace tessera::dist
