// ConvTranspose ({{rank}}-D, {{group}} group(s)) as a gather: one thread per output
// element (grid-stride) walks its group's input channels and the kernel taps, keeping
// each tap whose input position (o + pad - k * dilation) / stride divides exactly
// inside the input; f32 sums, one rounding at the store.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
{{decode}}        const long long m = r % {{m}}LL;
        const long long n = r / {{m}}LL;
        const long long grp = m / {{mg}}LL;
        const long long mo = m % {{mg}}LL;
        float acc = 0.0f;
        for (long long cc = 0; cc < {{cg}}LL; ++cc) {
            const long long ch = grp * {{cg}}LL + cc;
            const long long xb = (n * {{c}}LL + ch) * {{pin}}LL;
            const long long wb = (ch * {{mg}}LL + mo) * {{taps}}LL;
{{walk}}        }
        out[i] = {{store}};
    }
}
