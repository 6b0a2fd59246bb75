//===- Device.h - Hooks a GPU program's runtime provides ----------*- C++ -*-===//
//
// The runtime's main serves CPU and GPU programs alike. A GPU program links
// libcleave_rt_cuda, which defines these hooks; in a CPU program they stay
// null (weak) and buffers are plain host memory.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_DEVICE_H
#define CLEAVE_RUNTIME_DEVICE_H

#include <cstddef>

extern "C" {
/// A zeroed buffer both the host and the device can read and write.
__attribute__((weak)) void *cleave_rt_device_alloc(size_t bytes);
__attribute__((weak)) void cleave_rt_device_free(void *pointer);
/// Returns once everything the program queued on the device has finished.
__attribute__((weak)) void cleave_rt_device_wait();
}

namespace cleave::rt {
/// Whether this program runs its model on a GPU.
inline bool onDevice() { return cleave_rt_device_alloc != nullptr; }
} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_DEVICE_H
