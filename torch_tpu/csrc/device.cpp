// The tpu device for PyTorch: storage allocator, device guard, hooks and
// generators, each a thin shell over the C runtime.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "bridge.h"
#include "stream.h"

namespace torch_tpu {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

thread_local int current_index = 0;

void release_buffer(void* context) { tpu_buffer_release(static_cast<tpu_buffer*>(context)); }

void set_stat(c10::CachingDeviceAllocator::StatArray& stat, const tpu_memory_stat& from) {
  auto& all = stat[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  all.current = from.current;
  all.peak = from.peak;
  all.allocated = from.allocated;
  all.freed = from.freed;
}

// Storage holds a tpu_buffer handle as its data pointer: an opaque address
// that identifies the storage, never memory to read. A DeviceAllocator, so
// torch.accelerator's memory functions work; every storage is its own
// device allocation (no cache of freed blocks), so reserved equals
// allocated, and the statistics have no small/large pools.
struct TpuAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    int device = current_device();
    tpu_buffer* buffer = nullptr;
    check(tpu_buffer_create(device, nbytes, &buffer));
    return {buffer, buffer, &release_buffer, c10::Device(kTpu, static_cast<c10::DeviceIndex>(device))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release_buffer; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storage cannot be copied as raw bytes; use tensor.copy_()");
  }
  bool initialized() override { return tpu_runtime_ready(); }
  void emptyCache(c10::MempoolId_t) override { tpu_memory_release_cached(); }
  // A storage is freed after the work enqueued on it, whichever stream enqueued it.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    tpu_memory_stats stats = tpu_memory_stats_of(device);
    c10::CachingDeviceAllocator::DeviceStats out;
    for (auto* bytes : {&out.allocated_bytes, &out.reserved_bytes, &out.active_bytes, &out.requested_bytes})
      set_stat(*bytes, stats.bytes);
    for (auto* count : {&out.allocation, &out.segment, &out.active}) set_stat(*count, stats.allocations);
    out.num_device_alloc = stats.allocations.allocated;
    out.num_device_free = stats.allocations.freed;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    tpu_memory_reset_totals(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    tpu_memory_reset_peak(device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    int64_t free_bytes = 0, total = 0;
    check(tpu_memory_info(device, &free_bytes, &total));
    return {static_cast<size_t>(free_bytes), static_cast<size_t>(total)};
  }
};

TpuAllocator tpu_allocator;
// Also the allocator PyTorch looks up by device type (torch.UntypedStorage,
// deepcopy of tpu tensors).
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &tpu_allocator);

// Pinned host memory, which pin_memory(), DataLoader(pin_memory=True) and
// non_blocking copies to the host ask the device for. PJRT plugins copy from
// any host memory, so it is ordinary aligned host memory, remembered (with
// its size, for the statistics) only so that is_pinned() knows it.
std::mutex pinned_mutex;
std::unordered_map<const void*, size_t> pinned_blocks;
at::HostStats pinned_stats;  // under pinned_mutex

void release_pinned(void* data) {
  if (!data) return;
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    auto found = pinned_blocks.find(data);
    if (found != pinned_blocks.end()) {
      for (auto* stat : {&pinned_stats.allocations, &pinned_stats.active_requests}) stat->decrease(1);
      for (auto* stat : {&pinned_stats.allocated_bytes, &pinned_stats.active_bytes}) stat->decrease(found->second);
      pinned_stats.num_host_free++;
      pinned_blocks.erase(found);
    }
  }
  c10::free_cpu(data);
}

// Also PyTorch's host allocator for the device (torch.accelerator's
// empty_host_cache asks for it). Blocks are freed with their tensor, so
// there is no cache to empty, and a copy is done with its host memory when
// it returns, so no stream use needs recording.
struct PinnedHostAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> lock(pinned_mutex);
      pinned_blocks.emplace(data, nbytes);
      for (auto* stat : {&pinned_stats.allocations, &pinned_stats.active_requests}) stat->increase(1);
      for (auto* stat : {&pinned_stats.allocated_bytes, &pinned_stats.active_bytes}) stat->increase(nbytes);
      pinned_stats.num_host_alloc++;
    }
    return {data, data, &release_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    return pinned_stats;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    for (auto* stat : {&pinned_stats.allocations, &pinned_stats.allocated_bytes, &pinned_stats.active_requests,
                       &pinned_stats.active_bytes})
      stat->reset_accumulated();
    pinned_stats.num_host_alloc = pinned_stats.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    for (auto* stat : {&pinned_stats.allocations, &pinned_stats.allocated_bytes, &pinned_stats.active_requests,
                       &pinned_stats.active_bytes})
      stat->reset_peak();
  }
};

PinnedHostAllocator pinned_allocator;
REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &pinned_allocator);

bool is_pinned(const void* data) {
  std::lock_guard<std::mutex> lock(pinned_mutex);
  return pinned_blocks.count(data) > 0;
}

// Stream and event hooks come from TpuStreamGuardImpl (stream.cpp).
struct TpuGuard final : TpuStreamGuardImpl {
  c10::DeviceType type() const override { return kTpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kTpu, static_cast<c10::DeviceIndex>(current_index));
  }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_index = d.index();
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(tpu_device_count());
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuard);

// Philox-free generator state: the runtime derives each op's random bits
// from (seed, offset) with XLA's ThreeFry, so the state is just those two.
struct TpuGenerator final : c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kTpu, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = std::random_device{}() ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == at::kByte,
                "tpu generator state must be a uint8 tensor of 16 bytes (seed, offset), got ",
                state.numel(), " elements of ", state.dtype());
    const auto* words = static_cast<const uint64_t*>(state.data());
    seed_ = words[0];
    offset_ = words[1];
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::empty({16}, at::kByte);
    auto* words = static_cast<uint64_t*>(state.data_ptr());
    words[0] = seed_;
    words[1] = offset_;
    return state.getIntrusivePtr();
  }
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = 67280421310721ull;  // PyTorch's default seed
  uint64_t offset_ = 0;
};

std::vector<at::Generator>& generators() {
  static std::vector<at::Generator> all;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < tpu_device_count(); i++)
      all.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  return all;
}

// UntypedStorage.resize_ (FSDP2 frees its unsharded parameters to 0 bytes
// and grows them back before each all-gather): a new buffer; bytes kept
// across the resize travel through the host, which FSDP2's 0 <-> n never needs.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  size_t kept = std::min(storage.nbytes(), nbytes);
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr resized = tpu_allocator.allocate(nbytes);
  if (kept) {
    std::vector<uint8_t> bytes(storage.nbytes());
    check(tpu_buffer_to_host(static_cast<tpu_buffer*>(storage.data_ptr().get()), bytes.data()));
    bytes.resize(nbytes);
    check(tpu_buffer_from_host(static_cast<tpu_buffer*>(resized.get()), bytes.data()));
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(resized));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return tpu_runtime_ready() && tpu_device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(tpu_device_count()); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_index); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index < 0 ? current_index : index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TpuGenerator>(index < 0 ? static_cast<c10::DeviceIndex>(current_index) : index);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage_bytes(storage, nbytes);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return c10::Device(kTpu, static_cast<c10::DeviceIndex>(tpu_buffer_device(static_cast<tpu_buffer*>(data))));
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} register_hooks;

std::atomic<bool> fallback_enabled{false};
std::mutex fallback_mutex;
std::map<std::string, int64_t> fallback_counts;

}  // namespace

c10::Allocator* allocator() { return &tpu_allocator; }
int current_device() { return current_index; }

void check_device_index(int index) {
  int count = tpu_device_count();
  TORCH_CHECK(index >= 0 && index < count, "tpu:", index, " is not a valid device: there ",
              count == 1 ? "is 1 tpu device (tpu:0)" : "are " + std::to_string(count) + " tpu devices",
              "; pick an index from 0 to ", count - 1);
}

void set_current_device(int index) {
  check_device_index(index);
  current_index = index;
}

const at::Generator& default_generator(int device) {
  check_device_index(device);
  return generators()[device];
}

void next_rng_state(const std::optional<at::Generator>& generator, int device, uint64_t* seed,
                    uint64_t* offset) {
  at::Generator g = generator.has_value() && generator->defined() ? *generator : default_generator(device);
  TORCH_CHECK(g.device().type() == kTpu, "a random op on tpu got a generator for ", g.device(),
              "; pass torch.Generator(device=\"tpu\") or none");
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<TpuGenerator>();
  *seed = impl->seed_;
  *offset = impl->offset_++;
}

void reserve_rng_offsets(int device, uint64_t count, uint64_t* seed, uint64_t* offset) {
  at::Generator g = default_generator(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<TpuGenerator>();
  *seed = impl->seed_;
  *offset = impl->offset_;
  impl->offset_ += count;
}

bool cpu_fallback_enabled() { return fallback_enabled.load(); }
void set_cpu_fallback(bool enabled) { fallback_enabled.store(enabled); }

void count_cpu_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  fallback_counts[op]++;
}

std::map<std::string, int64_t> cpu_fallback_counts() {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  return fallback_counts;
}

void reset_cpu_fallback_counts() {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  fallback_counts.clear();
}

}  // namespace torch_tpu
