// Element-wise kernel: one thread per output element (grid-stride), inputs read through
// broadcast offsets, math in fp32 (fp64 for f64), one rounding at the store.
extern "C" __global__ void {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
{{index}}{{body}}        out[i] = {{store}};
    }
}
