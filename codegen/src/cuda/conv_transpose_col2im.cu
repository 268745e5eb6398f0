// Col2Im ({{rank}}-D) as a gather: one thread per output element (grid-stride) walks
// the block taps, keeping each tap whose block position (p + pad - k * dilation) /
// stride divides exactly inside the block grid, and sums that column's element; f32
// sums, one rounding at the store.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
{{decode}}        const long long xb = r * {{block}}LL;
        float acc = 0.0f;
{{walk}}        out[i] = {{store}};
    }
}
