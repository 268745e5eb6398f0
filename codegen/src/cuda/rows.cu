// Row kernel ({{what}}): one block of {{block}} threads per row of {{d}} elements,
// statistics in fp32 with block-wide reductions (warp shuffles, then shared memory),
// the row read from global memory once per pass, one rounding at the store.
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
{{body}}
}
