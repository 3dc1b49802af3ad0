// The HIP runtime through dlopen("libamdhip64.so"); declarations are ours (no HIP headers).
// The device's arch name comes from the kfd topology (the runtime's property struct differs
// between ROCm releases).
#include <vector>

#include "prewarm/runtime/gpu.h"
#include "prewarm/util/dynamic_library.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using HipError = int;

struct HipApi {
  HipError (*init)(unsigned) = nullptr;
  HipError (*get_device_count)(int*) = nullptr;
  HipError (*set_device)(int) = nullptr;
  HipError (*malloc)(void**, size_t) = nullptr;
  HipError (*free)(void*) = nullptr;
  HipError (*memcpy)(void*, const void*, size_t, int) = nullptr;
  HipError (*memset)(void*, int, size_t) = nullptr;
  HipError (*module_load_data)(void**, const void*) = nullptr;
  HipError (*module_get_function)(void**, void*, const char*) = nullptr;
  HipError (*module_get_global)(void**, size_t*, void*, const char*) = nullptr;
  HipError (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     void*, void**, void**) = nullptr;
  HipError (*synchronize)() = nullptr;
  HipError (*event_create)(void**) = nullptr;
  HipError (*event_record)(void*, void*) = nullptr;
  HipError (*event_synchronize)(void*) = nullptr;
  HipError (*event_elapsed_time)(float*, void*, void*) = nullptr;
  HipError (*event_destroy)(void*) = nullptr;
  const char* (*error_string)(HipError) = nullptr;
};

constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;
constexpr int kDeviceToDevice = 3;

class HipGpu final : public Gpu {
 public:
  HipGpu(DynamicLibrary lib, HipApi api, int device, std::string arch, int cus)
      : lib_(std::move(lib)), api_(api), device_(device), arch_(std::move(arch)), cus_(cus) {}

  std::string Name() const override { return StrCat("AMD GPU ", device_, " (", arch_, ")"); }
  std::string ArchName() const override { return arch_; }
  int MultiprocessorCount() const override { return cus_; }

  absl::StatusOr<DevicePtr> Alloc(size_t bytes) override {
    void* p = nullptr;
    RETURN_IF_ERROR(Check(api_.malloc(&p, bytes), "hipMalloc"));
    return reinterpret_cast<DevicePtr>(p);
  }
  absl::Status Free(DevicePtr p) override {
    return Check(api_.free(reinterpret_cast<void*>(p)), "hipFree");
  }
  absl::Status CopyToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    return Check(api_.memcpy(reinterpret_cast<void*>(dst), src, bytes, kHostToDevice), "hipMemcpy");
  }
  absl::Status CopyToHost(void* dst, DevicePtr src, size_t bytes) override {
    return Check(api_.memcpy(dst, reinterpret_cast<void*>(src), bytes, kDeviceToHost), "hipMemcpy");
  }
  absl::Status CopyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) override {
    return Check(api_.memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes,
                             kDeviceToDevice),
                 "hipMemcpy");
  }
  absl::Status Fill(DevicePtr dst, unsigned char byte, size_t bytes) override {
    return Check(api_.memset(reinterpret_cast<void*>(dst), byte, bytes), "hipMemset");
  }
  absl::StatusOr<void*> LoadModule(const std::string& code) override {
    void* m = nullptr;
    RETURN_IF_ERROR(Check(api_.module_load_data(&m, code.data()), "hipModuleLoadData"));
    return m;
  }
  absl::StatusOr<void*> GetFunction(void* module, const std::string& name) override {
    void* f = nullptr;
    RETURN_IF_ERROR(Check(api_.module_get_function(&f, module, name.c_str()),
                          StrCat("hipModuleGetFunction ", name)));
    return f;
  }
  absl::StatusOr<DevicePtr> GetGlobal(void* module, const std::string& name,
                                      size_t* bytes) override {
    void* p = nullptr;
    RETURN_IF_ERROR(Check(api_.module_get_global(&p, bytes, module, name.c_str()),
                          StrCat("hipModuleGetGlobal ", name)));
    return reinterpret_cast<DevicePtr>(p);
  }
  absl::Status Launch(void* function, Dim3 grid, Dim3 block, const std::vector<void*>& args,
                      unsigned shared_bytes, bool /*programmatic: CUDA's only*/) override {
    std::vector<void*> a = args;
    return Check(api_.launch(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                             shared_bytes, stream_, a.data(), nullptr),
                 "hipModuleLaunchKernel");
  }
  void SetStream(void* stream) override { stream_ = stream; }
  absl::StatusOr<void*> CreateEvent() override {
    void* e = nullptr;
    RETURN_IF_ERROR(Check(api_.event_create(&e), "hipEventCreate"));
    return e;
  }
  absl::Status RecordEvent(void* event) override {
    return Check(api_.event_record(event, stream_), "hipEventRecord");
  }
  absl::StatusOr<float> ElapsedMs(void* start, void* stop) override {
    RETURN_IF_ERROR(Check(api_.event_synchronize(stop), "hipEventSynchronize"));
    float ms = 0;
    RETURN_IF_ERROR(Check(api_.event_elapsed_time(&ms, start, stop), "hipEventElapsedTime"));
    return ms;
  }
  void DestroyEvent(void* event) override { api_.event_destroy(event); }
  absl::Status Synchronize() override { return Check(api_.synchronize(), "hipDeviceSynchronize"); }

 private:
  absl::Status Check(HipError r, std::string_view what) {
    if (r == 0) return absl::OkStatus();
    return absl::InternalError(StrCat(what, ": HIP error ", r, " (", api_.error_string(r), ")"));
  }

  DynamicLibrary lib_;
  HipApi api_;
  int device_;
  std::string arch_;
  int cus_;
  void* stream_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Gpu>> OpenHipGpu(int device) {
  ASSIGN_OR_RETURN(DynamicLibrary lib, DynamicLibrary::Open({"libamdhip64.so.6", "libamdhip64.so.5",
                                                             "libamdhip64.so"}));
  HipApi a;
  RETURN_IF_ERROR(lib.Get("hipInit", a.init));
  RETURN_IF_ERROR(lib.Get("hipGetDeviceCount", a.get_device_count));
  RETURN_IF_ERROR(lib.Get("hipSetDevice", a.set_device));
  RETURN_IF_ERROR(lib.Get("hipMalloc", a.malloc));
  RETURN_IF_ERROR(lib.Get("hipFree", a.free));
  RETURN_IF_ERROR(lib.Get("hipMemcpy", a.memcpy));
  RETURN_IF_ERROR(lib.Get("hipMemset", a.memset));
  RETURN_IF_ERROR(lib.Get("hipModuleLoadData", a.module_load_data));
  RETURN_IF_ERROR(lib.Get("hipModuleGetFunction", a.module_get_function));
  RETURN_IF_ERROR(lib.Get("hipModuleGetGlobal", a.module_get_global));
  RETURN_IF_ERROR(lib.Get("hipModuleLaunchKernel", a.launch));
  RETURN_IF_ERROR(lib.Get("hipDeviceSynchronize", a.synchronize));
  RETURN_IF_ERROR(lib.Get("hipGetErrorString", a.error_string));
  RETURN_IF_ERROR(lib.Get("hipEventCreate", a.event_create));
  RETURN_IF_ERROR(lib.Get("hipEventRecord", a.event_record));
  RETURN_IF_ERROR(lib.Get("hipEventSynchronize", a.event_synchronize));
  RETURN_IF_ERROR(lib.Get("hipEventElapsedTime", a.event_elapsed_time));
  RETURN_IF_ERROR(lib.Get("hipEventDestroy", a.event_destroy));
  // Without a kfd node the runtime has nothing to open; say so before touching it.
  const std::vector<std::string> archs = DetectKfdArchNames();
  if (archs.empty()) {
    return absl::FailedPreconditionError("no AMD GPU visible under /sys/class/kfd");
  }
  int count = 0;
  if (HipError r = a.init(0); r != 0 || a.get_device_count(&count) != 0 || count <= device) {
    return absl::FailedPreconditionError(
        StrCat("HIP sees ", count, " GPUs (hipInit: ", r, "); wanted device ", device));
  }
  a.set_device(device);
  const std::string arch = archs[static_cast<size_t>(device) < archs.size() ? device : 0];
  // The compute units from the kfd topology too (the runtime's attribute numbering differs
  // between ROCm releases).
  const std::vector<int> cus = DetectKfdComputeUnits();
  const int cu = static_cast<size_t>(device) < cus.size() ? cus[device] : 0;
  return std::unique_ptr<Gpu>(new HipGpu(std::move(lib), a, device, arch, cu > 0 ? cu : 1));
}

}  // namespace prewarm
