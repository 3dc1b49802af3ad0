// A GPU behind one small interface: the CUDA driver API (libcuda.so.1) on NVIDIA and the HIP
// runtime (libamdhip64.so) on AMD, both opened with dlopen, so the binary starts anywhere. With
// no GPU (or no driver) Open returns FailedPrecondition saying which, never crashes.
//
// Thread safety: one Gpu is used from one thread at a time (it binds its context to the calling
// thread on each call).
#ifndef PREWARM_RUNTIME_GPU_H_
#define PREWARM_RUNTIME_GPU_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/arch/arch.h"

namespace prewarm {

using DevicePtr = uint64_t;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class Gpu {
 public:
  virtual ~Gpu() = default;
  // "NVIDIA H200 (sm_90)".
  virtual std::string Name() const = 0;
  // The device's arch: "sm_90", "gfx942".
  virtual std::string ArchName() const = 0;
  // Its multiprocessors (NVIDIA SMs, AMD compute units), at least 1: what a persistent grid of
  // one block each is sized by.
  virtual int MultiprocessorCount() const = 0;

  virtual absl::StatusOr<DevicePtr> Alloc(size_t bytes) = 0;
  virtual absl::Status Free(DevicePtr p) = 0;
  virtual absl::Status CopyToDevice(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst, DevicePtr src, size_t bytes) = 0;
  virtual absl::Status Fill(DevicePtr dst, unsigned char byte, size_t bytes) = 0;
  virtual absl::Status CopyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) = 0;

  // Loads a code object (cubin or AMDGPU ELF); the handle lives until the Gpu is destroyed.
  virtual absl::StatusOr<void*> LoadModule(const std::string& code) = 0;
  virtual absl::StatusOr<void*> GetFunction(void* module, const std::string& name) = 0;
  // A __device__ variable of a loaded module (extern "C" name): its address; its size in bytes
  // into *bytes.
  virtual absl::StatusOr<DevicePtr> GetGlobal(void* module, const std::string& name,
                                              size_t* bytes) = 0;
  // `args` points at each kernel argument's value, in order. `shared_bytes` of dynamic shared
  // memory; above 48 KiB the function is first allowed that much (CUDA's opt-in).
  // `programmatic`: as a programmatic dependent of the stream's previous kernel (CUDA on sm_90,
  // the arch it was measured on, with a driver that has cuLaunchKernelEx and accepts the
  // attribute; after a refusal every launch is an ordinary one): its blocks may start while that
  // kernel runs, so the kernel must wait for it (griddepcontrol.wait) before reading what it
  // wrote. Elsewhere an ordinary launch, where that wait does nothing.
  virtual absl::Status Launch(void* function, Dim3 grid, Dim3 block, const std::vector<void*>& args,
                              unsigned shared_bytes, bool programmatic) = 0;
  // The stream Launch and RecordEvent use from now on: a CUstream / hipStream_t the caller owns
  // (a PyTorch stream), or null for the default stream. On CUDA it also makes this Gpu's context
  // current on the calling thread.
  virtual void SetStream(void* stream) = 0;
  // Events on the stream the launches use, for timing: an opaque handle, recorded, then the
  // milliseconds between two (waiting for the second), then destroyed.
  virtual absl::StatusOr<void*> CreateEvent() = 0;
  virtual absl::Status RecordEvent(void* event) = 0;
  virtual absl::StatusOr<float> ElapsedMs(void* start, void* stop) = 0;
  virtual void DestroyEvent(void* event) = 0;
  virtual absl::Status Synchronize() = 0;
};

absl::StatusOr<std::unique_ptr<Gpu>> OpenCudaGpu(int device = 0);
absl::StatusOr<std::unique_ptr<Gpu>> OpenHipGpu(int device = 0);
// GPU `device` of the first platform found: CUDA, then HIP. FailedPrecondition listing why each
// failed.
absl::StatusOr<std::unique_ptr<Gpu>> OpenAnyGpu(int device = 0);

// A device buffer freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Gpu* gpu, DevicePtr ptr, size_t bytes) : gpu_(gpu), ptr_(ptr), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : gpu_(o.gpu_), ptr_(o.ptr_), bytes_(o.bytes_) {
    o.gpu_ = nullptr;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  DevicePtr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  Gpu* gpu_ = nullptr;
  DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

// Runs `work` `reps` times and returns each run's device time in milliseconds (events around
// each run); `between`, when set, runs before each rep outside the timing (to flush caches).
absl::StatusOr<std::vector<float>> TimeEach(Gpu& gpu, const std::function<absl::Status()>& work,
                                            const std::function<absl::Status()>& between, int reps);

absl::StatusOr<DeviceBuffer> AllocBuffer(Gpu& gpu, size_t bytes);
// Allocates and uploads.
absl::StatusOr<DeviceBuffer> Upload(Gpu& gpu, const void* data, size_t bytes);
template <typename T>
absl::StatusOr<DeviceBuffer> Upload(Gpu& gpu, const std::vector<T>& v) {
  return Upload(gpu, v.data(), v.size() * sizeof(T));
}
template <typename T>
absl::StatusOr<std::vector<T>> Download(Gpu& gpu, const DeviceBuffer& b, size_t count) {
  std::vector<T> out(count);
  absl::Status s = gpu.CopyToHost(out.data(), b.ptr(), count * sizeof(T));
  if (!s.ok()) return s;
  return out;
}

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_GPU_H_
