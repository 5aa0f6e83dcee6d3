// Kernel launch with optional programmatic dependent launch (PDL, sm_90+): the next kernel in the
// stream is launched while this one finishes, and waits in griddepcontrol.wait until its predecessor
// has completed and its writes are visible. Every kernel here calls pdl_wait() before touching global
// memory, so enabling PDL never changes results; it only hides launch latency between the short
// kernels of a decode step (also inside CUDA graphs).
#pragma once

#include <cuda_runtime.h>

namespace glm5rt::kernels::detail {

__device__ __forceinline__ void pdl_wait_and_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // Dependents may launch now; they are scheduled only once every block of this grid has started,
  // and they wait for this grid's completion themselves.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Debug timeline (benchmarks only; MoeParams::debug_stamps): a kernel's slot is kStampWords u64 values,
// pairs (min, max) of %globaltimer nanoseconds at three points: block start, past the PDL wait, end of a
// warp's work. Null slot: nothing is written (one predictable branch). The atomics are a few per block,
// so the timeline shows where a step's time goes without changing it much; timed rows run without it.
constexpr int kStampStart = 0, kStampWaited = 1, kStampEnd = 2, kStampWords = 6;
__device__ __forceinline__ void stamp(unsigned long long* slot, int point) {
#if defined(__CUDA_ARCH__)
  if (slot) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    atomicMin(slot + 2 * point, t);
    atomicMax(slot + 2 * point + 1, t);
  }
#endif
}

// (Also the launch of the sparse MLA kernels, kernels/attention/sparse_mla_launch.h.)
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                   const Args&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (err != cudaSuccess && pdl) {
    // A driver or virtualisation layer that refuses the attribute: clear the error, launch plainly (the kernel's
    // PDL wait is then a no-op).
    (void)cudaGetLastError();
    cfg.attrs = nullptr;
    cfg.numAttrs = 0;
    err = cudaLaunchKernelEx(&cfg, kernel, args...);
  }
  return err;
}

// PDL needs compute capability 9.0+; below that the attribute is not set.
inline bool pdl_supported() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major >= 9;
}

}  // namespace glm5rt::kernels::detail
