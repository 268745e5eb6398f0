// MatMulNBits weight, dequantized for the GEMM that follows: W[{{n}}, {{k}}] ({{t}}, row-major) with
// W[n, k] = (q − zero point) · scale, q {{bits}}-bit packed [{{n}}, {{blocks}}, {{blob}}] bytes, one
// scale and zero point ({{zero}}) per block of {{block}} along K. One thread per 32-bit word of B
// ({{epu}} weights, all in one block), grid-stride: it reads the word, its block's scale and zero
// point, makes each q a float without a conversion instruction ((q | 0x4B000000) is 2^23 + q, less
// 2^23 is q), computes (q − z) · s in fp32 and rounds once to {{t}}. When K is a multiple of {{epu}}
// the {{epu}} results go out in {{ow}}-byte stores; otherwise one at a time, none past K.

extern "C" __global__ void __launch_bounds__({{block_threads}}) {{name}}({{params}}) {
    typedef {{ovec_t}} ovec_t;
    constexpr int N = {{n}}, K = {{k}};
    constexpr int BITS = {{bits}}, BLOCK = {{block}}, BLOCKS = {{blocks}}, ZROW = {{zrow}};
    // Elements per 32-bit word, words per row holding some k < K, words per row of B.
    constexpr int EPU = 32 / BITS, KU = (K + EPU - 1) / EPU, RU = {{ru}};
    // Zero points: 0 the default 2^(bits − 1), 1 packed u8, 2 floats.
    constexpr int ZF = {{zf}};
    {{zp_decl}}
    auto zero = [&](int n, int blk) -> float {
        if constexpr (ZF == 1) {
            const unsigned v = __ldg(zq + (long long)n * ZROW + blk * BITS / 8);
            return (float)((v >> ((blk * BITS) & 7)) & ((1u << BITS) - 1u));
        } else if constexpr (ZF == 2) {
            return gopt_ld(zf[(long long)n * BLOCKS + blk]);
        } else {
            return (float)(1 << (BITS - 1));
        }
    };
    const long long total = (long long)N * KU;
    for (long long idx = blockIdx.x * (long long){{block_threads}} + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * {{block_threads}}) {
        const int n = (int)(idx / KU), i = (int)(idx % KU);
        const unsigned w = __ldg(reinterpret_cast<const unsigned*>(b) + (long long)n * RU + i);
        const int k0 = i * EPU, blk = k0 / BLOCK;
        const float s = gopt_ld(scales[(long long)n * BLOCKS + blk]);
        const float z = zero(n, blk);
        alignas(16) {{t}} o[EPU];
#pragma unroll
        for (int e = 0; e < EPU; ++e) {
            const unsigned q = (w >> (BITS * e)) & ((1u << BITS) - 1u);
            const float v = (__uint_as_float(0x4B000000u | q) - 8388608.0f - z) * s;
            o[e] = {{store}};
        }
        {{t}}* row = y + (long long)n * K + k0;
        if constexpr (K % EPU == 0) {
#pragma unroll
            for (int j = 0; j < (int)(sizeof(o) / sizeof(ovec_t)); ++j) {
                reinterpret_cast<ovec_t*>(row)[j] = reinterpret_cast<const ovec_t*>(o)[j];
            }
        } else {
#pragma unroll
            for (int e = 0; e < EPU; ++e) {
                if (k0 + e < K) row[e] = o[e];
            }
        }
    }
}
