//===- Device.h - Hooks a GPU program's runtime provides ----------*- C++ -===//
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
/// A zeroed device buffer; with `hostVisible` the host can read and write
/// it too (managed memory), else only the device can (weights).
__attribute__((weak)) void *cleave_rt_device_alloc(size_t bytes,
                                                   int hostVisible);
__attribute__((weak)) void cleave_rt_device_free(void *pointer);
/// Copies `bytes` from host memory to device memory and waits for the copy.
__attribute__((weak)) void
cleave_rt_device_upload(void *device, const void *host, size_t bytes);
/// Copies `bytes` from device memory to host memory and waits for the copy.
__attribute__((weak)) void
cleave_rt_device_download(void *host, const void *device, size_t bytes);
/// Returns once everything the program queued on the device has finished.
__attribute__((weak)) void cleave_rt_device_wait();
/// After the ranks have joined the job: the device's communicators. Before
/// they leave it: their end.
__attribute__((weak)) void cleave_rt_device_start();
__attribute__((weak)) void cleave_rt_device_finish();
/// --profile (Profile.h): records an event on the program's stream and
/// returns its number; the milliseconds between two recorded events, once
/// the device has passed both; forgets every event recorded so far (their
/// numbers are given out again).
__attribute__((weak)) int cleave_rt_device_mark();
__attribute__((weak)) double cleave_rt_device_elapsed_ms(int from, int to);
__attribute__((weak)) void cleave_rt_device_forget_marks();
}

namespace cleave::rt {
/// Whether this program runs its model on a GPU.
inline bool onDevice() { return cleave_rt_device_alloc != nullptr; }
} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_DEVICE_H
