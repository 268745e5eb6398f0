// Trilu ({{what}} triangle of the last two dims, {{h}} x {{w}}): one thread per element
// (grid-stride), kept where column - row {{cmp}} k, zero elsewhere (copied as stored).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
{{k}}    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long c = i % {{w}}LL;
        const long long r = (i / {{w}}LL) % {{h}}LL;
        out[i] = (c - r {{cmp}} k) ? x[i] : {{zero}};
    }
}
