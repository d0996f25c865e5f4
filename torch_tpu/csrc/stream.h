// Streams and events of the tpu device, as PyTorch's device guard asks for
// them (torch.Stream, torch.Event, torch.accelerator, torch.tpu.Stream and
// Event, FSDP2). A device runs its work in one in-order queue; every stream
// of the device is a name for that queue, so waits between streams are
// no-ops and correctness never depends on them. Events are the runtime's
// (tpu_event: a mark on the work enqueued so far).
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_tpu {

// The stream hooks of the device guard; device.cpp's guard derives from it.
struct TpuStreamGuardImpl : c10::impl::DeviceGuardImplInterface {
  c10::Stream getStream(c10::Device d) const override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const override;
  c10::Stream getNewStream(c10::Device d, int priority) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(c10::DeviceIndex device_index) const override;
  void record(void** event, const c10::Stream& stream, c10::DeviceIndex device_index,
              c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end, c10::DeviceIndex device_index) const override;
  void destroyEvent(void* event, c10::DeviceIndex device_index) const noexcept override;
};

// The calling thread's current stream of `device`, and setting it.
c10::Stream current_stream(int device);
void set_current_stream(const c10::Stream& stream);

}  // namespace torch_tpu
