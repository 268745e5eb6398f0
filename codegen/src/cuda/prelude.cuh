// gopt CUDA prelude: storage <-> compute conversions shared by every generated kernel.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float gopt_ld(float x) { return x; }
__device__ __forceinline__ double gopt_ld(double x) { return x; }
__device__ __forceinline__ float gopt_ld(__half x) { return __half2float(x); }
__device__ __forceinline__ float gopt_ld(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ long long gopt_ld(signed char x) { return x; }
__device__ __forceinline__ long long gopt_ld(short x) { return x; }
__device__ __forceinline__ long long gopt_ld(int x) { return x; }
__device__ __forceinline__ long long gopt_ld(long long x) { return x; }
__device__ __forceinline__ long long gopt_ld(unsigned short x) { return x; }
__device__ __forceinline__ long long gopt_ld(unsigned int x) { return x; }
__device__ __forceinline__ unsigned long long gopt_ld(unsigned long long x) { return x; }

__device__ __forceinline__ float gopt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float gopt_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gopt_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// Block-wide reductions for row kernels (warp shuffles, then one value per warp in
// `red`, which must hold 32 floats); every thread gets the result.
__device__ __forceinline__ float gopt_block_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? red[threadIdx.x] : 0.0f;
    if (warp == 0) for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    return red[0];
}
__device__ __forceinline__ float gopt_block_max(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? red[threadIdx.x] : __int_as_float(0xff800000);
    if (warp == 0) for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    return red[0];
}
