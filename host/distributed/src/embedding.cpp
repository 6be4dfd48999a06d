// SPDX-License-Identifier: Apache-2.0
#include "tessera/dist/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "agree.hpp"
#include "state.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fs.hpp"
#include "tessera/dist/io.hpp"
#include "tessera/dist/runtime.hpp"
#include "tessera/partition/format.hpp"

namespace tessera::dist {

namespace detail {

struct OptimizerState {
  SparseOptimizer::Kind kind = SparseOptimizer::Kind::kAdagrad;
  DistTensor emb;
  std::vector<DistTensor> state;
  std::vector<std::string> suffixes;
  int64_t dim = 0;
  double lr = 0, eps = 0, beta1 = 0, beta2 = 0;
  int64_t calls = 0;  // step() calls on this rank: the headers compare it
};

namespace {

// "TSOP": the first bytes of every step message, so that a stray message is recognized.
constexpr uint32_t kStepMagic = 0x504F5354;

const char* kind_name(SparseOptimizer::Kind k) {
  return k == SparseOptimizer::Kind::kAdagrad ? "SparseAdagrad" : "SparseAdam";
}

void check_embedding(const DistTensor& emb, const char* what) {
  TESSERA_EXPECTS(emb.defined(), ValueError, "{}: the embedding DistTensor is undefined", what);
  TESSERA_EXPECTS(emb.dtype() == DType::kFloat32 && emb.shape().size() == 2, ValueError,
                  "{}: embedding DistTensor '{}' must be float32 of 2 dimensions [N, dim]; it is "
                  "{} of shape {}",
                  what, emb.name(), dtype_name(emb.dtype()), shape_string(emb.shape()));
  TESSERA_EXPECTS(emb.placement() == Placement::kHost, ValueError,
                  "{}: embedding DistTensor '{}' must have host rows (Placement::kHost): the "
                  "optimizer updates them on the host",
                  what, emb.name());
}

// A shared_ptr to the embedding's runtime that keeps it alive through a handle of the embedding
// (DistTensor needs a shared_ptr<Runtime> to create the state tensors).
std::shared_ptr<Runtime> runtime_of(const DistTensor& emb) {
  auto keep = std::make_shared<DistTensor>(emb);
  return std::shared_ptr<Runtime>(keep, &emb.runtime());
}

DistTensor state_tensor(const std::shared_ptr<Runtime>& rt, const DistTensor& emb,
                        const std::string& suffix, std::vector<int64_t> shape, DType dtype,
                        const InitFn& init = nullptr) {
  return DistTensor(rt, emb.name() + ":" + suffix, std::move(shape), dtype, emb.policy(), init,
                    /*persistent=*/true);
}

// One rank's view of a step message.
struct Header {
  std::string name;
  uint8_t kind = 0;
  int64_t calls = 0, dim = 0;
  ErrorKind status = ErrorKind::kNone;
  std::string error;
  std::string describe() const {
    return fmt::format("{} of '{}' (call {}, dim {})",
                       kind_name(static_cast<SparseOptimizer::Kind>(kind)), name, calls, dim);
  }
};

void put_header(Writer& w, const OptimizerState& s, int64_t call, ErrorKind status,
                const std::string& error) {
  w.put<uint32_t>(kStepMagic);
  w.put<uint32_t>(static_cast<uint32_t>(s.emb.name().size()));
  w.put_bytes(s.emb.name().data(), s.emb.name().size());
  w.put<uint8_t>(static_cast<uint8_t>(s.kind));
  w.put<int64_t>(call);
  w.put<int64_t>(s.dim);
  w.put<uint8_t>(static_cast<uint8_t>(status));
  w.put<uint32_t>(static_cast<uint32_t>(error.size()));
  w.put_bytes(error.data(), error.size());
}

Header get_header(Reader& r, int from) {
  Header h;
  TESSERA_EXPECTS(r.get<uint32_t>() == kStepMagic, ValueError,
                  "SparseOptimizer step: rank {} sent a message that is not a step message (a "
                  "mismatched collective?)",
                  from);
  const auto n = r.get<uint32_t>();
  const uint8_t* p = r.take(n);
  h.name.assign(reinterpret_cast<const char*>(p), n);
  h.kind = r.get<uint8_t>();
  h.calls = r.get<int64_t>();
  h.dim = r.get<int64_t>();
  h.status = static_cast<ErrorKind>(r.get<uint8_t>());
  const auto e = r.get<uint32_t>();
  const uint8_t* q = r.take(e);
  h.error.assign(reinterpret_cast<const char*>(q), e);
  return h;
}

// The one validator of step's arguments: IndexError for an ID outside [0, N), ValueError for
// missing gradients.
void check_step_args(const OptimizerState& s, ops::Span<const int64_t> ids, const float* grads) {
  // The update writes the host rows in place: a device mirror would go on serving the old ones.
  TESSERA_EXPECTS(!s.emb.mirror_info().mirrored, ValueError,
                  "{} step of DistEmbedding '{}': the embedding has a read-only device mirror, "
                  "which the update would leave stale (train it without mirroring it)",
                  kind_name(s.kind), s.emb.name());
  const int64_t rows = s.emb.num_rows();
  for (int64_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= rows) {
      TESSERA_FAIL(IndexError,
                   "{} step of DistEmbedding '{}': row ID {} at position {} is outside [0, {})",
                   kind_name(s.kind), s.emb.name(), ids[i], i, rows);
    }
  }
  TESSERA_EXPECTS(grads != nullptr || ids.empty() || s.dim == 0, ValueError,
                  "{} step of DistEmbedding '{}': null gradients for {} IDs", kind_name(s.kind),
                  s.emb.name(), ids.size());
}

// Repeated IDs summed in the order given: sorted unique IDs and their gradient rows.
void dedup(ops::Span<const int64_t> ids, const float* grads, int64_t dim,
           std::vector<int64_t>* uniq, std::vector<float>* sums) {
  const int64_t n = ids.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  uniq->clear();
  sums->clear();
  for (int64_t i : order) {
    if (uniq->empty() || uniq->back() != ids[i]) {
      uniq->push_back(ids[i]);
      sums->resize(sums->size() + static_cast<size_t>(dim), 0.0f);
    }
    float* acc = sums->data() + sums->size() - static_cast<size_t>(dim);
    const float* g = grads + i * dim;
    for (int64_t j = 0; j < dim; ++j) {
      acc[j] += g[j];
    }
  }
}

void apply_adagrad(const OptimizerState& s, const std::vector<int64_t>& rows,
                   const std::vector<float>& grads) {
  const int64_t dim = s.dim, lo = s.emb.local_range().first;
  auto* w = static_cast<float*>(s.emb.local_data());
  auto* sum = static_cast<float*>(s.state[0].local_data());
  const auto lr = static_cast<float>(s.lr), eps = static_cast<float>(s.eps);
  for (size_t k = 0; k < rows.size(); ++k) {
    float* wr = w + (rows[k] - lo) * dim;
    float* sr = sum + (rows[k] - lo) * dim;
    const float* g = grads.data() + k * dim;
    for (int64_t j = 0; j < dim; ++j) {
      sr[j] += g[j] * g[j];
      wr[j] -= lr * g[j] / (std::sqrt(sr[j]) + eps);
    }
  }
}

void apply_adam(const OptimizerState& s, const std::vector<int64_t>& rows,
                const std::vector<float>& grads) {
  const int64_t dim = s.dim, lo = s.emb.local_range().first;
  auto* w = static_cast<float*>(s.emb.local_data());
  auto* m = static_cast<float*>(s.state[0].local_data());
  auto* v = static_cast<float*>(s.state[1].local_data());
  auto* step = static_cast<int64_t*>(s.state[2].local_data());
  const auto lr = static_cast<float>(s.lr), eps = static_cast<float>(s.eps);
  const auto b1 = static_cast<float>(s.beta1), b2 = static_cast<float>(s.beta2);
  const auto omb1 = static_cast<float>(1.0 - s.beta1), omb2 = static_cast<float>(1.0 - s.beta2);
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t r = rows[k] - lo;
    const int64_t t = ++step[r];
    const auto bc1 = static_cast<float>(1.0 - std::pow(s.beta1, static_cast<double>(t)));
    const auto bc2 = static_cast<float>(1.0 - std::pow(s.beta2, static_cast<double>(t)));
    float* wr = w + r * dim;
    float* mr = m + r * dim;
    float* vr = v + r * dim;
    const float* g = grads.data() + k * dim;
    for (int64_t j = 0; j < dim; ++j) {
      mr[j] = b1 * mr[j] + omb1 * g[j];
      vr[j] = b2 * vr[j] + omb2 * g[j] * g[j];
      const float mhat = mr[j] / bc1;
      const float vhat = vr[j] / bc2;
      wr[j] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
}

// The collective step. `pre` is an argument error found before (it still takes part, so that
// every rank fails instead of the others waiting).
void step_impl(OptimizerState& s, ops::Span<const int64_t> ids, const float* grads,
               const std::exception_ptr& pre) {
  auto& t = s.emb.runtime().transport();
  const int world = t.world_size(), me = t.rank();
  const int64_t dim = s.dim;
  const int64_t call = s.calls++;
  const std::string context =
      fmt::format("{} step {} of DistEmbedding '{}'", kind_name(s.kind), call, s.emb.name());
  // Which optimizer and step are compared below, where a mismatch gets its own message.
  const transport::CollectiveLabel label(t, "SparseOptimizer step");
  std::exception_ptr err = pre;
  if (!err) {
    try {
      check_step_args(s, ids, grads);
    } catch (...) {
      err = std::current_exception();
    }
  }
  std::string error;
  const ErrorKind status = error_kind(err, &error);

  // Repeated IDs summed here; then (id, row) to each owner, behind the header.
  std::vector<transport::Bytes> out(static_cast<size_t>(world));
  {
    std::vector<int64_t> uniq;
    std::vector<float> sums;
    if (!err) {
      dedup(ids, grads, dim, &uniq, &sums);
    }
    const auto& pol = s.emb.policy();
    size_t k = 0;
    for (int p = 0; p < world; ++p) {
      size_t e = k;
      while (e < uniq.size() && uniq[e] < pol.offsets[p + 1]) {
        ++e;
      }
      Writer w;
      w.buf.reserve(64 + s.emb.name().size() + error.size() + (e - k) * (8 + 4 * dim));
      put_header(w, s, call, status, error);
      w.put<uint64_t>(e - k);
      w.put_bytes(uniq.data() + k, (e - k) * 8);
      w.put_bytes(sums.data() + k * dim, (e - k) * dim * 4);
      out[p] = std::move(w.buf);
      k = e;
    }
  }
  std::vector<transport::Bytes> in;
  try {
    in = t.all_to_all_v(out);
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(context);
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(context);
  } catch (const transport::RemoteError&) {
    rethrow_with_context(context);
  }

  // Every rank sees every rank's header: all of them agree on whether to fail.
  std::vector<Reader> readers;
  std::vector<Header> heads;
  readers.reserve(world);
  for (int p = 0; p < world; ++p) {
    readers.emplace_back(transport::ByteView(in[p]), "SparseOptimizer step");
    heads.push_back(get_header(readers.back(), p));
  }
  Header mine;
  mine.name = s.emb.name();
  mine.kind = static_cast<uint8_t>(s.kind);
  mine.calls = call;
  mine.dim = dim;
  for (int p = 0; p < world; ++p) {
    const Header& h = heads[p];
    TESSERA_EXPECTS(
        h.name == mine.name && h.kind == mine.kind && h.calls == mine.calls && h.dim == mine.dim,
        ValueError,
        "{}: rank {} called step of {} while rank {} called step of {} (step is "
        "collective: every rank calls it for the same optimizer, the same number of "
        "times)",
        context, p, h.describe(), me, mine.describe());
  }
  if (err) {
    std::rethrow_exception(err);
  }
  for (int p = 0; p < world; ++p) {
    if (heads[p].status != ErrorKind::kNone) {
      throw_error_kind(heads[p].status,
                       fmt::format("{}: rank {} failed: {}", context, p, heads[p].error));
    }
  }

  // The owner's sums: per row, senders in increasing rank order.
  const auto [lo, hi] = s.emb.local_range();
  std::unordered_map<int64_t, size_t> slot;
  std::vector<int64_t> rows;
  std::vector<float> acc, g(static_cast<size_t>(dim));
  for (int p = 0; p < world; ++p) {
    Reader& r = readers[p];
    const auto n = r.get<uint64_t>();
    TESSERA_EXPECTS(r.left() == n * (8 + 4 * static_cast<uint64_t>(dim)), ValueError,
                    "{}: malformed message from rank {} ({} bytes for {} rows)", context, p,
                    r.left(), n);
    const uint8_t* idb = r.take(n * 8);
    const uint8_t* gb = r.take(n * 4 * dim);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t id;
      std::memcpy(&id, idb + 8 * i, 8);
      TESSERA_ASSERT(id >= lo && id < hi, "{}: rank {} sent row {} to rank {}, which owns [{}, {})",
                     context, p, id, me, lo, hi);
      auto [it, fresh] = slot.try_emplace(id, rows.size());
      if (fresh) {
        rows.push_back(id);
        acc.resize(acc.size() + static_cast<size_t>(dim), 0.0f);
      }
      if (dim > 0) {
        std::memcpy(g.data(), gb + i * 4 * dim, 4 * dim);
      }
      float* a = acc.data() + it->second * dim;
      for (int64_t j = 0; j < dim; ++j) {
        a[j] += g[j];
      }
    }
  }
  if (s.kind == SparseOptimizer::Kind::kAdagrad) {
    apply_adagrad(s, rows, acc);
  } else {
    apply_adam(s, rows, acc);
  }
  // The rows changed through local_data(): their stamps follow (peers' one-sided reads).
  for (int64_t r : rows) {
    s.emb.local_rows_changed(r, r + 1);
    for (auto& st : s.state) {
      st.local_rows_changed(r, r + 1);
    }
  }
  // When step returns anywhere, every owner has applied its rows.
  try {
    t.barrier();
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(context);
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(context);
  }
}

}  // namespace
}  // namespace detail

SparseOptimizer SparseOptimizer::adagrad(const DistTensor& emb, const SparseAdagradOptions& o) {
  detail::check_embedding(emb, "SparseAdagrad");
  TESSERA_EXPECTS(o.lr >= 0 && o.eps >= 0 && o.initial_accumulator_value >= 0, ValueError,
                  "SparseAdagrad of '{}': lr {}, eps {} and initial_accumulator_value {} must be "
                  ">= 0",
                  emb.name(), o.lr, o.eps, o.initial_accumulator_value);
  auto s = std::make_shared<detail::OptimizerState>();
  s->kind = Kind::kAdagrad;
  s->emb = emb;
  s->dim = emb.shape()[1];
  s->lr = o.lr;
  s->eps = o.eps;
  const auto rt = detail::runtime_of(emb);
  const auto init_value = static_cast<float>(o.initial_accumulator_value);
  const int64_t dim = s->dim;
  InitFn fill = nullptr;
  if (init_value != 0.0f) {
    fill = [init_value, dim](int64_t b, int64_t e, void* dst) {
      std::fill_n(static_cast<float*>(dst), (e - b) * dim, init_value);
    };
  }
  s->suffixes = {"adagrad_sum"};
  s->state.push_back(
      detail::state_tensor(rt, emb, "adagrad_sum", emb.shape(), DType::kFloat32, fill));
  SparseOptimizer opt;
  opt.s_ = std::move(s);
  return opt;
}

SparseOptimizer SparseOptimizer::adam(const DistTensor& emb, const SparseAdamOptions& o) {
  detail::check_embedding(emb, "SparseAdam");
  TESSERA_EXPECTS(
      o.lr >= 0 && o.eps >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
      ValueError,
      "SparseAdam of '{}': lr {} and eps {} must be >= 0, beta1 {} and beta2 {} in "
      "[0, 1)",
      emb.name(), o.lr, o.eps, o.beta1, o.beta2);
  auto s = std::make_shared<detail::OptimizerState>();
  s->kind = Kind::kAdam;
  s->emb = emb;
  s->dim = emb.shape()[1];
  s->lr = o.lr;
  s->eps = o.eps;
  s->beta1 = o.beta1;
  s->beta2 = o.beta2;
  const auto rt = detail::runtime_of(emb);
  s->suffixes = {"adam_m", "adam_v", "adam_step"};
  s->state.push_back(detail::state_tensor(rt, emb, "adam_m", emb.shape(), DType::kFloat32));
  s->state.push_back(detail::state_tensor(rt, emb, "adam_v", emb.shape(), DType::kFloat32));
  s->state.push_back(detail::state_tensor(rt, emb, "adam_step", {emb.num_rows()}, DType::kInt64));
  SparseOptimizer opt;
  opt.s_ = std::move(s);
  return opt;
}

void SparseOptimizer::step(ops::Span<const int64_t> ids, const float* grads) {
  TESSERA_EXPECTS(defined(), ValueError, "step of an undefined SparseOptimizer");
  detail::step_impl(*s_, ids, grads, nullptr);
}

void SparseOptimizer::step(ops::Span<const int64_t> ids, const Array& grads) {
  TESSERA_EXPECTS(defined(), ValueError, "step of an undefined SparseOptimizer");
  std::exception_ptr pre;
  const float* g = nullptr;
  try {
    TESSERA_EXPECTS(grads.dtype() == DType::kFloat32, TypeError,
                    "{} step of DistEmbedding '{}': gradients are {}, expected float32",
                    detail::kind_name(s_->kind), s_->emb.name(), dtype_name(grads.dtype()));
    TESSERA_EXPECTS(
        grads.ndim() == 2 && grads.dim(0) == ids.size() && grads.dim(1) == s_->dim, ValueError,
        "{} step of DistEmbedding '{}': gradients of shape {} for {} IDs of dim {}",
        detail::kind_name(s_->kind), s_->emb.name(), grads.shape_str(), ids.size(), s_->dim);
    g = grads.data<float>();
  } catch (...) {
    pre = std::current_exception();
  }
  detail::step_impl(*s_, ids, g, pre);
}

void SparseOptimizer::set_lr(double lr) {
  TESSERA_EXPECTS(defined(), ValueError, "set_lr of an undefined SparseOptimizer");
  TESSERA_EXPECTS(lr >= 0, ValueError, "{} of '{}': learning rate {} must be >= 0",
                  detail::kind_name(s_->kind), s_->emb.name(), lr);
  s_->lr = lr;
}

double SparseOptimizer::lr() const {
  TESSERA_EXPECTS(defined(), ValueError, "lr of an undefined SparseOptimizer");
  return s_->lr;
}

SparseOptimizer::Kind SparseOptimizer::kind() const {
  TESSERA_EXPECTS(defined(), ValueError, "kind of an undefined SparseOptimizer");
  return s_->kind;
}

const DistTensor& SparseOptimizer::embedding() const {
  TESSERA_EXPECTS(defined(), ValueError, "embedding of an undefined SparseOptimizer");
  return s_->emb;
}

const std::vector<DistTensor>& SparseOptimizer::state_tensors() const {
  TESSERA_EXPECTS(defined(), ValueError, "state_tensors of an undefined SparseOptimizer");
  return s_->state;
}

const DistTensor& SparseOptimizer::state(const std::string& suffix) const {
  TESSERA_EXPECTS(defined(), ValueError, "state of an undefined SparseOptimizer");
  for (size_t i = 0; i < s_->suffixes.size(); ++i) {
    if (s_->suffixes[i] == suffix) {
      return s_->state[i];
    }
  }
  std::string have;
  for (const auto& x : s_->suffixes) {
    have += (have.empty() ? "" : ", ") + x;
  }
  TESSERA_FAIL(ValueError, "{} of '{}' has no state '{}'; it has: {}", detail::kind_name(s_->kind),
               s_->emb.name(), suffix, have);
}

int64_t SparseOptimizer::num_steps() const {
  TESSERA_EXPECTS(defined(), ValueError, "num_steps of an undefined SparseOptimizer");
  return s_->calls;
}

namespace {

// A save of an optimizer's state tensors in progress: rank 0 creates the marker before any of
// them is written and removes it once all are, so a save cut short (a crash, a full disk) leaves
// it behind, and load refuses state of which only some tensors are new (Adam's moments from
// one step paired with the step counts of another).
std::filesystem::path saving_marker(const DistTensor& emb, const std::filesystem::path& dir) {
  return dir / (sanitized_tensor_name(emb.name()) + ".optimizer-saving");
}

}  // namespace

void SparseOptimizer::save(const std::filesystem::path& dir) const {
  TESSERA_EXPECTS(defined(), ValueError, "save of an undefined SparseOptimizer");
  auto& t = s_->emb.runtime().transport();
  const std::string context = fmt::format("{} of '{}': save to {}", detail::kind_name(s_->kind),
                                          s_->emb.name(), dir.string());
  const transport::CollectiveLabel label(
      t, fmt::format("{} of '{}': save", detail::kind_name(s_->kind), s_->emb.name()));
  const std::filesystem::path marker = saving_marker(s_->emb, dir);
  std::exception_ptr err;
  if (t.rank() == 0) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      TESSERA_EXPECTS(!ec, IOError, "cannot create folder {}: {}", dir.string(), ec.message());
      write_text_atomic(marker, "a save of this optimizer's state began and has not ended\n");
    } catch (...) {
      err = std::current_exception();
    }
  }
  detail::all_or_nothing(t, context, err);
  for (const auto& st : s_->state) {
    save_dist_tensor(st, dir);  // collective, ends once the tensor is on disk on every rank
  }
  err = nullptr;
  if (t.rank() == 0) {
    std::error_code ec;
    std::filesystem::remove(marker, ec);
    if (ec) {
      err = std::make_exception_ptr(
          IOError(fmt::format("cannot remove {}: {}", marker.string(), ec.message())));
    }
  }
  detail::all_or_nothing(t, context, err);
}

void SparseOptimizer::load(const std::filesystem::path& dir) {
  TESSERA_EXPECTS(defined(), ValueError, "load of an undefined SparseOptimizer");
  // Rank 0 looks for the marker (it writes it) and every rank learns the outcome: ranks whose
  // folders differ (node-local disks) must not part ways before the collective reads.
  auto& t = s_->emb.runtime().transport();
  const transport::CollectiveLabel label(
      t, fmt::format("{} of '{}': load", detail::kind_name(s_->kind), s_->emb.name()));
  const std::filesystem::path marker = saving_marker(s_->emb, dir);
  std::exception_ptr err;
  if (t.rank() == 0 && std::filesystem::exists(marker)) {
    err = std::make_exception_ptr(ValueError(fmt::format(
        "{} of '{}': the state in {} is from a save that did not finish ({} is there), so its "
        "tensors may come from different steps; load an older checkpoint",
        detail::kind_name(s_->kind), s_->emb.name(), dir.string(), marker.string())));
  }
  detail::all_or_nothing(t,
                         fmt::format("{} of '{}': load from {}", detail::kind_name(s_->kind),
                                     s_->emb.name(), dir.string()),
                         err);
  // Every state tensor's files are checked and read before any is replaced: a missing or bad
  // one leaves the whole state as it was (Adam's moments never paired with other step counts).
  std::vector<Array> rows;
  for (const auto& t : s_->state) {
    rows.push_back(detail::read_saved_rows(t, dir));
  }
  for (size_t i = 0; i < s_->state.size(); ++i) {
    detail::store_loaded_rows(s_->state[i], rows[i],
                              fmt::format("{} of '{}': load from {}", detail::kind_name(s_->kind),
                                          s_->emb.name(), dir.string()));
  }
}

}  // namespace tessera::dist
