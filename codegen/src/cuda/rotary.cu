// RotaryEmbedding ({{dtype}} data, fp32 math): one thread per output element (grid-stride).
// Channel c < RD of a head is one half of a pair (x1, x2) rotated by the cos/sin of its batch
// and position: cos·x1 - sin·x2 (first) or sin·x1 + cos·x2 (second); channels past RD are
// copied. The same algorithm as the WGSL shader, line by line.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    constexpr long long N = {{n}}, D = {{d}}, RD = {{rd}}, HALF = {{half}};
    constexpr bool INTERLEAVED = {{interleaved}};
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < N; e += stride) {
        const long long c = e % D;
        const long long base = e - c;
        if (c >= RD) {
            y[e] = {{copy}};
            continue;
        }
        long long r = e / D;
{{coords}}        long long pair = c;
        bool first = c < HALF;
        long long i1 = c;
        long long i2 = c + HALF;
        if (INTERLEAVED) {
            pair = c / 2;
            first = c % 2 == 0;
            i1 = 2 * pair;
            i2 = i1 + 1;
        } else if (!first) {
            pair = c - HALF;
            i1 = pair;
            i2 = c;
        }
{{row}}        const float co = gopt_ld(cos_c[row + pair]);
        const float si = gopt_ld(sin_c[row + pair]);
        const float x1 = gopt_ld(x[{{x1}}]);
        const float x2 = gopt_ld(x[{{x2}}]);
        float v = si * x1 + co * x2;
        if (first) { v = co * x1 - si * x2; }
        y[e] = {{store}};
    }
}
