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
__device__ __forceinline__ double gopt_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ double gopt_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }
__device__ __forceinline__ double gopt_gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
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

// Element-wise helpers, overloaded for each compute type (float, double, long long,
// unsigned long long). Max and min propagate NaN (numpy's maximum/minimum).
__device__ __forceinline__ float gopt_max(float a, float b) { return (b != b || b > a) ? b : a; }
__device__ __forceinline__ double gopt_max(double a, double b) { return (b != b || b > a) ? b : a; }
__device__ __forceinline__ long long gopt_max(long long a, long long b) { return b > a ? b : a; }
__device__ __forceinline__ unsigned long long gopt_max(unsigned long long a, unsigned long long b) { return b > a ? b : a; }
__device__ __forceinline__ float gopt_min(float a, float b) { return (b != b || b < a) ? b : a; }
__device__ __forceinline__ double gopt_min(double a, double b) { return (b != b || b < a) ? b : a; }
__device__ __forceinline__ long long gopt_min(long long a, long long b) { return b < a ? b : a; }
__device__ __forceinline__ unsigned long long gopt_min(unsigned long long a, unsigned long long b) { return b < a ? b : a; }
// Mod with fmod = 0: the remainder takes the divisor's sign (a zero one too); with
// fmod = 1 (integers: `gopt_imod_trunc`), the dividend's. An integer divisor of 0
// gives 0.
__device__ __forceinline__ float gopt_mod_floor(float a, float b) {
    const float m = fmodf(a, b);
    if (b == 0.0f) return m;
    if (m == 0.0f) return copysignf(0.0f, b);
    return ((b < 0.0f) != (m < 0.0f)) ? m + b : m;
}
__device__ __forceinline__ double gopt_mod_floor(double a, double b) {
    const double m = fmod(a, b);
    if (b == 0.0) return m;
    if (m == 0.0) return copysign(0.0, b);
    return ((b < 0.0) != (m < 0.0)) ? m + b : m;
}
__device__ __forceinline__ long long gopt_imod_trunc(long long a, long long b) {
    return (b == 0 || b == -1) ? 0 : a % b;
}
__device__ __forceinline__ unsigned long long gopt_imod_trunc(unsigned long long a, unsigned long long b) {
    return b == 0 ? 0 : a % b;
}
__device__ __forceinline__ long long gopt_imod_floor(long long a, long long b) {
    const long long r = gopt_imod_trunc(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ unsigned long long gopt_imod_floor(unsigned long long a, unsigned long long b) {
    return gopt_imod_trunc(a, b);
}
// log(1 + e^x) without overflow for large x.
__device__ __forceinline__ float gopt_softplus(float x) {
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
__device__ __forceinline__ double gopt_softplus(double x) {
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
// x * tanh(softplus(x)) as x * n / (n + 2) with n = e^x (e^x + 2): no cancellation in
// 1 + e^x for negative x; from x = 20 on, tanh(softplus(x)) is 1 in f32.
__device__ __forceinline__ float gopt_mish(float x) {
    if (x >= 20.0f) return x;
    const float e = expf(x);
    const float n = e * (e + 2.0f);
    return x * n / (n + 2.0f);
}
__device__ __forceinline__ double gopt_mish(double x) { return x * tanh(gopt_softplus(x)); }
// log(exp(a) + exp(b)) without overflow: an infinite or NaN operand gives what the
// interpreter's shifted sum gives (NaN, +inf, or the other operand for -inf).
__device__ __forceinline__ float gopt_logaddexp(float a, float b) {
    if (a != a || b != b) return a + b;
    const float m = fmaxf(a, b), n = fminf(a, b);
    if (n == __int_as_float(0xff800000) || m == __int_as_float(0x7f800000)) return m;
    return m + log1pf(expf(n - m));
}
__device__ __forceinline__ double gopt_logaddexp(double a, double b) {
    if (a != a || b != b) return a + b;
    const double m = fmax(a, b), n = fmin(a, b);
    if ((isinf(n) && n < 0.0) || (isinf(m) && m > 0.0)) return m;
    return m + log1p(exp(n - m));
}
