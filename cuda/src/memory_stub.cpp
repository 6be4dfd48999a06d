// SPDX-License-Identifier: Apache-2.0
// CPU-only build: memory, streams and kernels exist and raise not_compiled_with_cuda.
#include "tessera/cuda/block_sampler.hpp"
#include "tessera/cuda/device.hpp"
#include "tessera/cuda/kernels.hpp"
#include "tessera/cuda/memory.hpp"
#include "tessera/cuda/runtime.hpp"

namespace tessera::cuda {

Stream::Stream() {
  require_cuda("Stream");
}
Stream::~Stream() = default;
Stream& Stream::operator=(Stream&& o) noexcept {
  std::swap(s_, o.s_);
  std::swap(device_, o.device_);
  return *this;
}
void Stream::synchronize() const {
  require_cuda("Stream::synchronize");
}
Event::Event() {
  require_cuda("Event");
}
Event::~Event() = default;
void Event::record(StreamHandle) {
  require_cuda("Event::record");
}
void Event::make_wait(StreamHandle) const {
  require_cuda("Event::make_wait");
}
void Event::synchronize() const {
  require_cuda("Event::synchronize");
}
float Event::elapsed_ms_since(const Event&) const {
  require_cuda("Event::elapsed_ms_since");
  return 0;
}
DeviceBuffer::DeviceBuffer(size_t) {
  require_cuda("DeviceBuffer");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  return *this;
}
PinnedBuffer::PinnedBuffer(size_t) {
  require_cuda("PinnedBuffer");
}
PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  return *this;
}
HostRegistration::HostRegistration(const void*, size_t, bool) {
  require_cuda("HostRegistration");
}
HostRegistration::~HostRegistration() = default;
void copy_async(void*, const void*, size_t, StreamHandle) {
  require_cuda("copy_async");
}
void memset_async(void*, int, size_t, StreamHandle) {
  require_cuda("memset_async");
}
void synchronize(StreamHandle) {
  require_cuda("synchronize");
}
bool is_device_accessible(const void*) {
  return false;
}
int multiprocessor_count() {
  require_cuda("multiprocessor_count");
  return 0;
}
size_t l2_cache_bytes() {
  require_cuda("l2_cache_bytes");
  return 0;
}

int current_device() {
  require_cuda("current_device");
  return 0;
}
void set_device(int) {
  require_cuda("set_device");
}
DeviceGuard::DeviceGuard(int device) {
  if (device >= 0) require_cuda("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

namespace {
class NoDeviceUpstream final : public Upstream {
 public:
  void* allocate(size_t) override {
    require_cuda("scratch allocation");
    return nullptr;
  }
  void deallocate(void*, size_t) override {}
};
}  // namespace
Upstream& device_upstream() {
  static NoDeviceUpstream up;
  return up;
}

void gather_rows_impl(const void*, int64_t, int64_t, const void*, IndexType, int64_t, void*,
                      unsigned long long*, StreamHandle, GatherOrder) {
  require_cuda("gather_rows");
}
bool gather_sorts_indices(const void*, int64_t, int64_t, GatherOrder) {
  require_cuda("gather_rows");
  return false;
}
void scatter_rows_impl(const void*, int64_t, int64_t, const void*, IndexType, void*, int64_t,
                       unsigned long long*, StreamHandle) {
  require_cuda("scatter_rows");
}
void gather_rows_cached_impl(const void*, int64_t, int64_t, const void*, const int64_t*,
                             const void*, IndexType, int64_t, void*, unsigned long long*,
                             unsigned long long*, StreamHandle, GatherOrder) {
  require_cuda("gather_rows_cached");
}
void spmm_impl(const void*, const void*, IndexType, int64_t, int64_t, int64_t, const float*,
               int64_t, float*, Reduce, bool, StreamHandle, SpmmEngine) {
  require_cuda("spmm");
}
void aggregate_rows_impl(const int64_t*, const int64_t*, const float*, int64_t, const float*,
                         int64_t, float*, RowReduce, StreamHandle) {
  require_cuda("aggregate_rows");
}
void csr_offsets_impl(const int64_t*, int64_t, int64_t, int64_t*, StreamHandle) {
  require_cuda("csr_offsets");
}
FeatureCache::FeatureCache(const void*, int64_t, int64_t, const int64_t*, int64_t, const int64_t*,
                           StreamHandle) {
  require_cuda("FeatureCache");
}
FeatureCache::~FeatureCache() = default;
void FeatureCache::read_counters(StreamHandle, int64_t*, int64_t*) const {
  require_cuda("FeatureCache::read_counters");
}
void FeatureCache::reset_counters(StreamHandle) {
  require_cuda("FeatureCache::reset_counters");
}
DeviceSample sample_neighbors_uniform_impl(const int64_t*, const int64_t*, const int64_t*,
                                           const int64_t*, int64_t, int64_t, bool, bool,
                                           const RngKey&, StreamHandle, const rows::ExcludeView*,
                                           const int64_t*) {
  require_cuda("sample_neighbors");
  return {};
}
DeviceSample sample_neighbors_weighted_impl(const int64_t*, const int64_t*, const int64_t*,
                                            const float*, const double*, const int64_t*, int64_t,
                                            int64_t, bool, bool, const RngKey&, StreamHandle,
                                            const rows::ExcludeView*, const int64_t*) {
  require_cuda("sample_neighbors (weighted)");
  return {};
}
DeviceSample sample_neighbors_impl(const GraphView&, const int64_t*, int64_t, int64_t, bool, bool,
                                   const RngKey&, StreamHandle, const rows::ExcludeView*,
                                   const int64_t*) {
  require_cuda("sample_neighbors");
  return {};
}
void weight_prefix_sums_impl(const int64_t*, int64_t, const float*, double*, StreamHandle) {
  require_cuda("weight_prefix_sums");
}
void weight_row_tables_impl(const int64_t*, int64_t, const float*, double*, int64_t*,
                            StreamHandle) {
  require_cuda("weight_row_tables");
}

struct BlockSampler::Impl {};
struct BlockSampler::Pending::State {};
BlockSampler::Pending::Pending() = default;
BlockSampler::Pending::~Pending() = default;
BlockSampler::Pending::Pending(Pending&&) noexcept = default;
BlockSampler::Pending& BlockSampler::Pending::operator=(Pending&&) noexcept = default;
std::vector<SampledBatch> BlockSampler::Pending::wait() {
  require_cuda("BlockSampler");
  return {};
}
BlockSampler::BlockSampler(const GraphView& graph, BlockSamplerOptions opts)
    : g_(graph), opts_(std::move(opts)) {
  require_cuda("BlockSampler");
}
BlockSampler::~BlockSampler() = default;
BlockSampler::Pending BlockSampler::enqueue(const int64_t*, const std::vector<int64_t>&,
                                            const std::vector<RngKey>&, StreamHandle,
                                            const rows::ExcludeView*) const {
  require_cuda("BlockSampler");
  return {};
}
BlockSamplerStats BlockSampler::stats() const {
  return {};
}
DeviceBlock to_block_impl(const int64_t*, const int64_t*, int64_t, const int64_t*, int64_t,
                          StreamHandle) {
  require_cuda("to_block");
  return {};
}
double probe_gather_ms(const void*, int64_t, int64_t, int64_t, GatherOrder, int, bool, int,
                       uint64_t) {
  require_cuda("gather probe");
  return 0;
}
double row_read_rate(const GraphView&, const int64_t*, const VisitSegment*, int, bool, int, int64_t,
                     int) {
  require_cuda("row read limit");
  return 0;
}
double random_read_rate(const void*, int64_t, int, bool, int) {
  require_cuda("random read bench");
  return 0;
}

}  // namespace tessera::cuda
