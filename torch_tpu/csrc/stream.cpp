// Streams as names, events as runtime events: see stream.h.
#include "stream.h"

#include <array>
#include <atomic>

#include <torch/library.h>

#include "bridge.h"

namespace torch_tpu {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;

// Each thread's current stream per device; 0 is the default stream.
thread_local std::array<c10::StreamId, kMaxDevices> current_ids{};
std::atomic<c10::StreamId> next_id{1};

int index_of(c10::DeviceIndex index) {
  int device = index < 0 ? current_device() : index;
  check_device_index(device);
  TORCH_CHECK(device < kMaxDevices, "tpu:", device, " is past the ", kMaxDevices, " devices streams support");
  return device;
}

int stream_device(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kTpu, "expected a tpu stream, got a stream of ",
              stream.device_type());
  return index_of(stream.device_index());
}

c10::Stream named(c10::StreamId id, int device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, static_cast<c10::DeviceIndex>(device)), id);
}

c10::Stream new_stream(c10::Device d) { return named(next_id++, index_of(d.index())); }

}  // namespace

c10::Stream current_stream(int device) {
  int index = index_of(static_cast<c10::DeviceIndex>(device));
  return named(current_ids[index], index);
}

void set_current_stream(const c10::Stream& stream) { current_ids[stream_device(stream)] = stream.id(); }

c10::Stream TpuStreamGuardImpl::getStream(c10::Device d) const { return current_stream(d.index()); }

c10::Stream TpuStreamGuardImpl::getDefaultStream(c10::Device d) const { return named(0, index_of(d.index())); }

c10::Stream TpuStreamGuardImpl::getStreamFromGlobalPool(c10::Device d, bool) const { return new_stream(d); }

c10::Stream TpuStreamGuardImpl::getNewStream(c10::Device d, int) const { return new_stream(d); }

c10::Stream TpuStreamGuardImpl::exchangeStream(c10::Stream s) const {
  c10::Stream previous = current_stream(stream_device(s));
  set_current_stream(s);
  return previous;
}

bool TpuStreamGuardImpl::queryStream(const c10::Stream& stream) const {
  void* event = nullptr;
  record(&event, stream, stream.device_index(), c10::EventFlag::PYTORCH_DEFAULT);
  bool done = false;
  tpu_status status = tpu_event_query(static_cast<tpu_event*>(event), &done);
  tpu_event_destroy(static_cast<tpu_event*>(event));
  check(status);
  return done;
}

void TpuStreamGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  check(tpu_device_synchronize(stream_device(stream)));
}

void TpuStreamGuardImpl::synchronizeDevice(c10::DeviceIndex device_index) const {
  check(tpu_device_synchronize(index_of(device_index)));
}

void TpuStreamGuardImpl::record(void** event, const c10::Stream& stream, c10::DeviceIndex,
                                c10::EventFlag flag) const {
  int device = stream_device(stream);
  if (!*event) {
    tpu_event* made = nullptr;
    check(tpu_event_create(flag == c10::EventFlag::BACKEND_DEFAULT, &made));  // BACKEND_DEFAULT: timing
    *event = made;
  }
  check(tpu_event_record(static_cast<tpu_event*>(*event), device));
}

// One queue per device: the stream already runs after the event's work.
void TpuStreamGuardImpl::block(void*, const c10::Stream& stream) const { stream_device(stream); }

bool TpuStreamGuardImpl::queryEvent(void* event) const {
  bool done = true;
  if (event) check(tpu_event_query(static_cast<tpu_event*>(event), &done));
  return done;
}

void TpuStreamGuardImpl::synchronizeEvent(void* event) const {
  if (event) check(tpu_event_synchronize(static_cast<tpu_event*>(event)));
}

double TpuStreamGuardImpl::elapsedTime(void* start, void* end, c10::DeviceIndex) const {
  TORCH_CHECK(start && end, "both events must be recorded before calculating elapsed time");
  double ms = 0;
  check(tpu_event_elapsed_ms(static_cast<tpu_event*>(start), static_cast<tpu_event*>(end), &ms));
  return ms;
}

void TpuStreamGuardImpl::destroyEvent(void* event, c10::DeviceIndex) const noexcept {
  tpu_event_destroy(static_cast<tpu_event*>(event));
}

namespace {

// Tensor.record_stream: nothing to do. A storage freed while work that
// reads it is in flight stays alive in the plugin until that work ends,
// whatever stream issued it.
void record_stream(at::Tensor& self, c10::Stream stream) { stream_device(stream); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", &record_stream); }

}  // namespace torch_tpu
