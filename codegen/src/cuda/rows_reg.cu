// Row kernel ({{what}}), register-cached: one block of {{block}} threads per row of {{d}}
// elements; each thread loads its {{per}} elements once with 16-byte accesses
// ({{vec}} per access), keeps them in registers for the statistics (fp32, block-wide
// reductions), and stores the result with 16-byte accesses: one read and one write of
// the row.
__device__ __forceinline__ float gopt_block_sum_{{name}}(float v, float* red) {
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
__device__ __forceinline__ float gopt_block_max_{{name}}(float v, float* red) {
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
extern "C" __global__ void {{name}}({{params}}) {
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const {{t}}* __restrict__ xr = x + row * {{d}}LL;
    {{t}}* __restrict__ yr = out + row * {{d}}LL;
    float v[{{per}}];
    bool ok[{{per}} / {{vec}}];
#pragma unroll
    for (int k = 0; k < {{per}} / {{vec}}; ++k) {
        const int c0 = (k * {{block}} + threadIdx.x) * {{vec}};
        ok[k] = c0 < {{d}};
        union { uint4 u; {{t}} e[{{vec}}]; } l;
        if (ok[k]) l.u = reinterpret_cast<const uint4*>(xr)[c0 / {{vec}}];
#pragma unroll
        for (int e = 0; e < {{vec}}; ++e) v[k * {{vec}} + e] = ok[k] ? gopt_ld(l.e[e]) : 0.0f;
    }
{{body}}
#pragma unroll
    for (int k = 0; k < {{per}} / {{vec}}; ++k) {
        if (!ok[k]) continue;
        const int c0 = (k * {{block}} + threadIdx.x) * {{vec}};
        union { uint4 u; {{t}} e[{{vec}}]; } s;
{{pre}}#pragma unroll
        for (int e = 0; e < {{vec}}; ++e) {
            const int c = c0 + e;
            s.e[e] = {{store}};
        }
        reinterpret_cast<uint4*>(yr)[c0 / {{vec}}] = s.u;
    }
}
