#include "prewarm/runtime/gpu.h"

#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (gpu_ != nullptr) (void)gpu_->Free(ptr_);
    gpu_ = o.gpu_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.gpu_ = nullptr;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (gpu_ != nullptr) (void)gpu_->Free(ptr_);
}

absl::StatusOr<DeviceBuffer> AllocBuffer(Gpu& gpu, size_t bytes) {
  ASSIGN_OR_RETURN(DevicePtr p, gpu.Alloc(bytes == 0 ? 1 : bytes));
  return DeviceBuffer(&gpu, p, bytes);
}

absl::StatusOr<DeviceBuffer> Upload(Gpu& gpu, const void* data, size_t bytes) {
  ASSIGN_OR_RETURN(DeviceBuffer b, AllocBuffer(gpu, bytes));
  if (bytes > 0) RETURN_IF_ERROR(gpu.CopyToDevice(b.ptr(), data, bytes));
  return b;
}

absl::StatusOr<std::vector<float>> TimeEach(Gpu& gpu, const std::function<absl::Status()>& work,
                                            const std::function<absl::Status()>& between,
                                            int reps) {
  ASSIGN_OR_RETURN(void* start, gpu.CreateEvent());
  absl::StatusOr<void*> stop = gpu.CreateEvent();
  std::vector<float> ms;
  absl::Status status = stop.status();
  for (int i = 0; i < reps && status.ok(); ++i) {
    if (between) status = between();
    if (status.ok()) status = gpu.RecordEvent(start);
    if (status.ok()) status = work();
    if (status.ok()) status = gpu.RecordEvent(*stop);
    if (!status.ok()) break;
    absl::StatusOr<float> t = gpu.ElapsedMs(start, *stop);
    status = t.status();
    if (t.ok()) ms.push_back(*t);
  }
  gpu.DestroyEvent(start);
  if (stop.ok()) gpu.DestroyEvent(*stop);
  if (!status.ok()) return status;
  return ms;
}

absl::StatusOr<std::unique_ptr<Gpu>> OpenAnyGpu(int device) {
  absl::StatusOr<std::unique_ptr<Gpu>> cuda = OpenCudaGpu(device);
  if (cuda.ok()) return cuda;
  absl::StatusOr<std::unique_ptr<Gpu>> hip = OpenHipGpu(device);
  if (hip.ok()) return hip;
  return absl::FailedPreconditionError(
      StrCat("no GPU: CUDA: ", cuda.status().message(), "; HIP: ", hip.status().message()));
}

}  // namespace prewarm
