// The CUDA driver API through dlopen("libcuda.so.1"); declarations are ours (no CUDA headers).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "prewarm/runtime/gpu.h"
#include "prewarm/util/dynamic_library.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUdeviceptr = unsigned long long;
using CUevent = void*;

// cuLaunchKernelEx's configuration, laid out as cuda.h declares it: an attribute is its id,
// padding to 8 bytes and a 64-byte value.
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "cuda.h's CUlaunchAttribute");
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void* stream;
  CUlaunchAttribute* attrs;
  unsigned num_attrs;
};
static_assert(sizeof(CUlaunchConfig) == 56, "cuda.h's CUlaunchConfig");
constexpr int kLaunchAttrProgrammaticStreamSerialization = 6;

struct CudaApi {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*memcpy_dtod)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_get_global)(CUdeviceptr*, size_t*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, void*, void**, void**) = nullptr;
  // Absent from older drivers: programmatic launches are then ordinary ones.
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*func_set_attribute)(CUfunction, int, int) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, void*) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kFuncAttrMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr unsigned kStaticSharedLimit = 48 * 1024;

class CudaGpu final : public Gpu {
 public:
  CudaGpu(DynamicLibrary lib, CudaApi api, CUcontext ctx, std::string name, std::string arch,
          int sms, bool programmatic)
      : lib_(std::move(lib)),
        api_(api),
        ctx_(ctx),
        name_(std::move(name)),
        arch_(std::move(arch)),
        sms_(sms),
        programmatic_(programmatic) {}

  std::string Name() const override { return name_; }
  std::string ArchName() const override { return arch_; }
  int MultiprocessorCount() const override { return sms_; }

  absl::StatusOr<DevicePtr> Alloc(size_t bytes) override {
    CUdeviceptr p = 0;
    RETURN_IF_ERROR(Check(api_.mem_alloc(&p, bytes), "cuMemAlloc"));
    return p;
  }
  absl::Status Free(DevicePtr p) override { return Check(api_.mem_free(p), "cuMemFree"); }
  absl::Status CopyToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    return Check(api_.memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
  }
  absl::Status CopyToHost(void* dst, DevicePtr src, size_t bytes) override {
    return Check(api_.memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
  }
  absl::Status Fill(DevicePtr dst, unsigned char byte, size_t bytes) override {
    return Check(api_.memset_d8(dst, byte, bytes), "cuMemsetD8");
  }
  absl::Status CopyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) override {
    return Check(api_.memcpy_dtod(dst, src, bytes), "cuMemcpyDtoD");
  }
  absl::StatusOr<void*> LoadModule(const std::string& code) override {
    CUmodule m = nullptr;
    RETURN_IF_ERROR(Check(api_.module_load_data(&m, code.data()), "cuModuleLoadData"));
    return m;
  }
  absl::StatusOr<void*> GetFunction(void* module, const std::string& name) override {
    CUfunction f = nullptr;
    RETURN_IF_ERROR(Check(api_.module_get_function(&f, module, name.c_str()),
                          StrCat("cuModuleGetFunction ", name)));
    return f;
  }
  absl::StatusOr<DevicePtr> GetGlobal(void* module, const std::string& name,
                                      size_t* bytes) override {
    CUdeviceptr p = 0;
    RETURN_IF_ERROR(Check(api_.module_get_global(&p, bytes, module, name.c_str()),
                          StrCat("cuModuleGetGlobal ", name)));
    return p;
  }
  absl::Status Launch(void* function, Dim3 grid, Dim3 block, const std::vector<void*>& args,
                      unsigned shared_bytes, bool programmatic) override {
    // The opt-in is per function and lasts: ask the driver once, not at every launch.
    if (shared_bytes > kStaticSharedLimit && shared_opt_in_[function] < shared_bytes) {
      RETURN_IF_ERROR(Check(api_.func_set_attribute(function, kFuncAttrMaxDynamicShared,
                                                    static_cast<int>(shared_bytes)),
                            StrCat("cuFuncSetAttribute(max dynamic shared ", shared_bytes, ")")));
      shared_opt_in_[function] = shared_bytes;
    }
    std::vector<void*> a = args;
    if (programmatic && programmatic_) {
      CUlaunchAttribute attr{};
      attr.id = kLaunchAttrProgrammaticStreamSerialization;
      attr.value.programmatic_stream_serialization_allowed = 1;
      const CUlaunchConfig config{grid.x,  grid.y,       grid.z,  block.x, block.y,
                                  block.z, shared_bytes, stream_, &attr,   1};
      const CUresult r = api_.launch_kernel_ex(&config, function, a.data(), nullptr);
      if (r == 0) return absl::OkStatus();
      // A driver that refuses the attribute (in a stream capture, say): this launch and every
      // later one are ordinary ones, which the kernels' wait serves as well.
      programmatic_ = false;
    }
    return Check(api_.launch_kernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                    shared_bytes, stream_, a.data(), nullptr),
                 "cuLaunchKernel");
  }
  void SetStream(void* stream) override {
    api_.ctx_set_current(ctx_);
    stream_ = stream;
  }
  absl::StatusOr<void*> CreateEvent() override {
    CUevent e = nullptr;
    RETURN_IF_ERROR(Check(api_.event_create(&e, 0), "cuEventCreate"));
    return e;
  }
  absl::Status RecordEvent(void* event) override {
    return Check(api_.event_record(event, stream_), "cuEventRecord");
  }
  absl::StatusOr<float> ElapsedMs(void* start, void* stop) override {
    RETURN_IF_ERROR(Check(api_.event_synchronize(stop), "cuEventSynchronize"));
    float ms = 0;
    RETURN_IF_ERROR(Check(api_.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime"));
    return ms;
  }
  void DestroyEvent(void* event) override { api_.event_destroy(event); }
  absl::Status Synchronize() override { return Check(api_.ctx_synchronize(), "cuCtxSynchronize"); }

 private:
  absl::Status Check(CUresult r, std::string_view what) {
    if (r == 0) return absl::OkStatus();
    const char* msg = nullptr;
    api_.get_error_string(r, &msg);
    return absl::InternalError(StrCat(what, ": CUDA error ", r, " (", msg ? msg : "?", ")"));
  }

  DynamicLibrary lib_;
  CudaApi api_;
  CUcontext ctx_;
  std::string name_, arch_;
  int sms_;
  // sm_90 (the arch measured), the driver has cuLaunchKernelEx and has not refused it.
  bool programmatic_;
  std::unordered_map<void*, unsigned> shared_opt_in_;  // function -> dynamic shared bytes allowed
  void* stream_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Gpu>> OpenCudaGpu(int device) {
  ASSIGN_OR_RETURN(DynamicLibrary lib, DynamicLibrary::Open({"libcuda.so.1"}));
  CudaApi a;
  RETURN_IF_ERROR(lib.Get("cuInit", a.init));
  RETURN_IF_ERROR(lib.Get("cuDeviceGetCount", a.device_get_count));
  RETURN_IF_ERROR(lib.Get("cuDeviceGet", a.device_get));
  RETURN_IF_ERROR(lib.Get("cuDeviceGetName", a.device_get_name));
  RETURN_IF_ERROR(lib.Get("cuDeviceGetAttribute", a.device_get_attribute));
  RETURN_IF_ERROR(lib.Get("cuDevicePrimaryCtxRetain", a.primary_ctx_retain));
  RETURN_IF_ERROR(lib.Get("cuCtxSetCurrent", a.ctx_set_current));
  RETURN_IF_ERROR(lib.Get("cuMemAlloc_v2", a.mem_alloc));
  RETURN_IF_ERROR(lib.Get("cuMemFree_v2", a.mem_free));
  RETURN_IF_ERROR(lib.Get("cuMemcpyHtoD_v2", a.memcpy_htod));
  RETURN_IF_ERROR(lib.Get("cuMemcpyDtoH_v2", a.memcpy_dtoh));
  RETURN_IF_ERROR(lib.Get("cuMemsetD8_v2", a.memset_d8));
  RETURN_IF_ERROR(lib.Get("cuMemcpyDtoD_v2", a.memcpy_dtod));
  RETURN_IF_ERROR(lib.Get("cuModuleLoadData", a.module_load_data));
  RETURN_IF_ERROR(lib.Get("cuModuleGetFunction", a.module_get_function));
  RETURN_IF_ERROR(lib.Get("cuModuleGetGlobal_v2", a.module_get_global));
  RETURN_IF_ERROR(lib.Get("cuLaunchKernel", a.launch_kernel));
  if (!lib.Get("cuLaunchKernelEx", a.launch_kernel_ex).ok()) a.launch_kernel_ex = nullptr;
  RETURN_IF_ERROR(lib.Get("cuCtxSynchronize", a.ctx_synchronize));
  RETURN_IF_ERROR(lib.Get("cuGetErrorString", a.get_error_string));
  RETURN_IF_ERROR(lib.Get("cuFuncSetAttribute", a.func_set_attribute));
  RETURN_IF_ERROR(lib.Get("cuEventCreate", a.event_create));
  RETURN_IF_ERROR(lib.Get("cuEventRecord", a.event_record));
  RETURN_IF_ERROR(lib.Get("cuEventSynchronize", a.event_synchronize));
  RETURN_IF_ERROR(lib.Get("cuEventElapsedTime", a.event_elapsed_time));
  RETURN_IF_ERROR(lib.Get("cuEventDestroy_v2", a.event_destroy));
  if (CUresult r = a.init(0); r != 0) {
    return absl::FailedPreconditionError(
        StrCat("cuInit failed with CUDA error ", r, " (no NVIDIA GPU or driver visible)"));
  }
  int count = 0;
  a.device_get_count(&count);
  if (device >= count) {
    return absl::FailedPreconditionError(
        StrCat("CUDA sees ", count, " GPUs; wanted device ", device));
  }
  CUdevice dev = 0;
  a.device_get(&dev, device);
  char name[256] = {};
  a.device_get_name(name, sizeof(name), dev);
  int major = 0, minor = 0;
  a.device_get_attribute(&major, kAttrComputeMajor, dev);
  a.device_get_attribute(&minor, kAttrComputeMinor, dev);
  int sms = 0;
  a.device_get_attribute(&sms, kAttrMultiprocessorCount, dev);
  CUcontext ctx = nullptr;
  if (CUresult r = a.primary_ctx_retain(&ctx, dev); r != 0) {
    return absl::FailedPreconditionError(StrCat("cuDevicePrimaryCtxRetain failed: ", r));
  }
  a.ctx_set_current(ctx);
  const std::string arch = StrCat("sm_", major * 10 + minor);
  return std::unique_ptr<Gpu>(new CudaGpu(std::move(lib), a, ctx, StrCat(name, " (", arch, ")"),
                                          arch, std::max(sms, 1),
                                          major == 9 && a.launch_kernel_ex != nullptr));
}

}  // namespace prewarm
