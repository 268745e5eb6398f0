// {{what}} over contiguous runs: {{rows}} rows of {{len}} elements, {{tpr}} threads per
// row (a warp, or the whole block for long rows), grid-stride over rows; each thread
// folds a strided slice in {{acc_name}}, then warp shuffles (and shared memory across warps).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    constexpr int TPR = {{tpr}}, RPB = 256 / TPR;
    constexpr long long ROWS = {{rows}}LL, LEN = {{len}}LL;
    auto combine = []({{acc}} a, {{acc}} b) { return {{combine}}; };
    __shared__ {{acc}} red[32];
    const int lane = threadIdx.x % TPR;
    for (long long row0 = (long long)blockIdx.x * RPB; row0 < ROWS; row0 += (long long)gridDim.x * RPB) {
        const long long row = row0 + threadIdx.x / TPR;
        {{acc}} acc = {{identity}};
        if (row < ROWS) {
            for (long long j = lane; j < LEN; j += TPR) {
                const {{acc}} v = gopt_ld(x[row * LEN + j]);
                acc = combine(acc, {{map}});
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, o));
        if (TPR > 32) {
            __syncthreads();
            if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
            __syncthreads();
            acc = (threadIdx.x < TPR / 32) ? red[threadIdx.x] : {{identity}};
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, o));
        }
        if (lane == 0 && row < ROWS) out[row] = {{store}};
    }
}
