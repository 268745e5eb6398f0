// {{what}}: one thread per output bin (grid-stride), a direct sum over the {{n}} lane
// elements with exact twiddles at the quarter turns; f32 accumulation.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < total; b += stride) {
        const long long i = b % {{inner}}LL;
        long long r = b / {{inner}}LL;
        const long long k = r % {{bins}}LL;
        r /= {{bins}}LL;
        const long long f = r % {{frames}}LL;
        const long long o = r / {{frames}}LL;
        const long long base = o * {{outer_stride}}LL + f * {{frame_stride}}LL + i;
        float acc_re = 0.0f, acc_im = 0.0f;
        for (long long j = 0; j < {{lanes}}LL; ++j) {
{{lane}}
            const long long q = (j * k) % {{n}}LL;
            float c, s;
            if ((4 * q) % {{n}}LL == 0) {
                const long long quarter = (4 * q) / {{n}}LL;
                c = quarter == 0 ? 1.0f : (quarter == 2 ? -1.0f : 0.0f);
                s = quarter == 1 ? 1.0f : (quarter == 3 ? -1.0f : 0.0f);
            } else {
                const float theta = 6.283185307179586f * (float)q / {{n}}.0f;
                c = cosf(theta);
                s = sinf(theta);
            }
            s = {{sign}}s;
            acc_re += re * c - im * s;
            acc_im += re * s + im * c;
        }
        out[b * {{out_comps}}LL] = {{store_re}};
{{store_im}}    }
}
