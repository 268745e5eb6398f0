// {{what}}: one thread per output element (grid-stride) walks its window, skipping
// taps outside the input; f32 arithmetic, one rounding at the store.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        {{decode}}{{body}}        out[i] = {{store}};
    }
}
