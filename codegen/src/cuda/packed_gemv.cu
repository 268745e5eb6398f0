// MatMulNBits GEMV on tensor cores: y[{{m}}, {{n}}] = A · Wᵀ{{formula}}, A {{t}} [{{m}}, {{k}}],
// W[n, k] = (q − zero point) · scale, q {{bits}}-bit packed [{{n}}, {{blocks}}, {{blob}}] bytes, one
// scale and zero point ({{zero}}) per block of {{block}} along K. With this few rows the product is
// bound by reading the packed weight once, so the kernel streams it with {{w}}-byte evict-first loads
// and keeps the unpacking to about two instructions per weight: CUDA cores would then still owe one
// fp32 FMA per weight and row, and one conversion per element of A; the tensor cores take both.
//
// A block of {{s}} warp(s) owns 16 output columns; its warps split K between them. Lane (g, t) =
// (lane / 4, lane % 4) loads word t of each chunk of 4 words of the rows of columns n0 + g and
// n0 + g + 8, {{u}} chunk(s) in flight, the scales and zero points of their blocks, and the same
// {{ve}} elements of A's row g (and g + 8) through the read-only cache. It dequantizes the words in
// registers to {{t}} pairs ({{dequant}}) and runs mma.sync m16n8k16: the 16 columns x 16 k as the
// first operand, A's rows as the second, fp32 accumulators. Which k fills which of an mma's 16
// slots is free as long as both operands agree: lane t holds slots {2t, 2t+1, 2t+8, 2t+9} of both,
// so each lane pairs elements (p, p + D) of every 32-bit word of the weight and of A the same way,
// and every product stays matched with no shuffle. K past the last word with elements below K is
// never loaded; inside that word A's elements past K are zero. Warp 0 adds the other warps' sums
// through shared memory, adds the bias, and rounds once at the store.

static __device__ __forceinline__ void {{name}}_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                                    unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.{{ptx}}.{{ptx}}.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A {{t}} (stored as its 16 bits) as a float.
static __device__ __forceinline__ float {{name}}_f(unsigned short x) { return gopt_ld({{from_bits}}(x)); }

// Two floats rounded once to a {{t}} pair, `lo` in the low half.
static __device__ __forceinline__ unsigned {{name}}_pack(float lo, float hi) {
    {{t2}} v = {{pack2}}(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// Elements (p, p + D) of a 32-bit word of B as a {{t}} pair (magic + q_p, magic + q_p+D): magic
// is 2^(mantissa bits) ({{magic}}), so OR-ing q < magic into its mantissa adds q exactly. 4-bit:
// (w >> 4p) & 0x000F000F | magic in one LOP3 (written in C, ptxas splits it in two, as both
// constants are immediates); 8-bit (f16 only: 255 needs more than bf16's 7 mantissa bits): one
// PRMT of bytes p and p + 2 with the magic's high byte.
template <int BITS>
static __device__ __forceinline__ unsigned {{name}}_pair(unsigned w, int p) {
    unsigned r;
    if constexpr (BITS == 4) {
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(w >> (4 * p)), "n"(0x000F000F), "n"({{magic}} * 0x10001));
    } else {
        r = __byte_perm(w, {{magic}} >> 8, 0x4040 | ((p + 2) << 8) | p);
    }
    return r;
}

// x − zz on {{t}} pairs: x holds two (magic + q), zz two (magic + z), all exact, and so is q − z.
static __device__ __forceinline__ unsigned {{name}}_sub(unsigned x, unsigned zz) {
    {{t2}} v = __hsub2(*reinterpret_cast<{{t2}}*>(&x), *reinterpret_cast<{{t2}}*>(&zz));
    return *reinterpret_cast<unsigned*>(&v);
}

// (x − zz) · ss on {{t}} pairs: the difference exact, the product rounded once.
static __device__ __forceinline__ unsigned {{name}}_scale(unsigned x, unsigned zz, unsigned ss) {
    {{t2}} v = __hmul2(__hsub2(*reinterpret_cast<{{t2}}*>(&x), *reinterpret_cast<{{t2}}*>(&zz)),
                       *reinterpret_cast<{{t2}}*>(&ss));
    return *reinterpret_cast<unsigned*>(&v);
}

// (x − (magic + z)) · s with a float zero point: x's two (magic + q) widened to fp32 (exact),
// then one FMA each against c = −(magic + z) · s; rounded once to a {{t}} pair.
static __device__ __forceinline__ unsigned {{name}}_affine(unsigned x, float s, float c) {
    const float2 f = {{to_float2}}(*reinterpret_cast<{{t2}}*>(&x));
    return {{name}}_pack(fmaf(f.x, s, c), fmaf(f.y, s, c));
}

// Room for {{min_blocks}} block(s) per SM, up to 128 registers a thread: sized by the block alone,
// ptxas stops near 64 registers and spills.
extern "C" __global__ void __launch_bounds__({{threads}}, {{min_blocks}}) {{name}}({{params}}) {
    typedef {{word_t}} word_t;
    typedef {{aword_t}} aword_t;
    constexpr int M = {{m}}, N = {{n}}, K = {{k}};
    constexpr int BITS = {{bits}}, BLOCK = {{block}}, BLOCKS = {{blocks}}, ZROW = {{zrow}};
    // 32-bit words per load of B, elements per 32-bit word and per load, loads per row of B.
    constexpr int WU = {{wu}}, EPU = 32 / BITS, VE = WU * EPU, RW = {{rw}};
    // Loads of a row holding some k < K, in chunks of 4 (one per lane t).
    constexpr int KW = (K + VE - 1) / VE, CH = (KW + 3) / 4;
    constexpr int S = {{s}}, U = {{u}}, MH = (M + 7) / 8, AE = {{ae}};
    // Each 32-bit word of the weight pairs its elements (p, p + D).
    constexpr int D = EPU / 2;
    // Blocks one load of B spans (2 only for 4-bit blocks of 16 in 16-byte loads).
    constexpr int BPW = VE > BLOCK ? VE / BLOCK : 1;
    // Zero points: 0 the default 2^(bits − 1), 1 packed u8, 2 floats.
    constexpr int ZF = {{zf}};
    // 4-bit weights, and 8-bit ones for f16, unpack straight to {{t}} pairs ({{name}}_pair);
    // 8-bit bf16 ones go through fp32.
    constexpr bool PAIRS = BITS == 4 || {{f16}};
    // With integer zero points the pairs take magic + z off exactly: q − z, then the scale.
    constexpr bool FAST = PAIRS && ZF != 2;
    // ... and when a chunk's 4 loads lie in one block, each mma's 16 k share one scale per
    // column: the pairs stay (q − z), exact, and the scale multiplies the chunk's fp32 sums.
    constexpr bool POST = FAST && BLOCK >= 4 * VE;
    constexpr unsigned MAGIC = {{magic}}u;
    // The value of the magic's bits: 2^(mantissa bits).
    constexpr int MAGIC_VALUE = {{f16}} ? 1024 : 128;
    {{zp_decl}}
    auto zero = [&](int n, int blk) -> float {
        if constexpr (ZF == 1) {
            const unsigned v = __ldg(zq + (long long)n * ZROW + blk * BITS / 8);
            return (float)((v >> ((blk * BITS) & 7)) & ((1u << BITS) - 1u));
        } else if constexpr (ZF == 2) {
            return {{name}}_f(__ldg(reinterpret_cast<const unsigned short*>(zf) + (long long)n * BLOCKS + blk));
        } else {
            return (float)(1 << (BITS - 1));
        }
    };
    const unsigned short* sb = reinterpret_cast<const unsigned short*>(scales);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 16;
    int col[2];
    col[0] = min(n0 + g, N - 1);
    col[1] = min(n0 + g + 8, N - 1);
    float acc[MH][4];
#pragma unroll
    for (int h = 0; h < MH; ++h) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[h][e] = 0.0f;
    }
#pragma unroll 1
    for (int c0 = warp; c0 < CH; c0 += S * U) {
        // Every load of the pass is issued before any is used.
        word_t raw[U][2];
        unsigned short sc[U][2][BPW];
        float zr[U][2][BPW];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u * S, wd = 4 * c + t;
            const bool chunk = CH % (S * U) == 0 || c < CH;
            const bool ok = chunk && (KW % 4 == 0 || wd < KW);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                raw[u][j] = word_t{};
#pragma unroll
                for (int bb = 0; bb < BPW; ++bb) {
                    sc[u][j][bb] = 0;
                    zr[u][j][bb] = 0.0f;
                }
                if (ok) raw[u][j] = __ldcs(reinterpret_cast<const word_t*>(b) + (long long)col[j] * RW + wd);
                // With POST every lane scales sums over the whole chunk: it needs the scale
                // even when its own load is past K.
                if (POST ? chunk : ok) {
#pragma unroll
                    for (int bb = 0; bb < BPW; ++bb) {
                        const int blk = (POST ? 4 * c : wd) * VE / BLOCK + bb;
                        sc[u][j][bb] = __ldg(sb + (long long)col[j] * BLOCKS + blk);
                        zr[u][j][bb] = zero(col[j], blk);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            // A chunk past the end is past it for the whole warp: the mma stays warp-uniform.
            if (!(CH % (S * U) == 0 || c0 + u * S < CH)) continue;
            const int wd = 4 * (c0 + u * S) + t;
            const bool ok = KW % 4 == 0 || wd < KW;
            // A's rows g and g + 8 over this load's elements, two to a 32-bit word.
            alignas(16) unsigned av[MH][VE / 2];
#pragma unroll
            for (int h = 0; h < MH; ++h) {
                const int r = 8 * h + g;
                const bool row = r < M && ok;
                const aword_t* src = reinterpret_cast<const aword_t*>(a + (row ? (long long)r * K + (long long)wd * VE : 0LL));
                aword_t* dst = reinterpret_cast<aword_t*>(av[h]);
#pragma unroll
                for (int j = 0; j < VE / AE; ++j) {
                    const bool in = row && (K % VE == 0 || wd * VE + (j + 1) * AE <= K);
                    dst[j] = in ? __ldg(src + j) : aword_t{};
                }
            }
            // Both columns' weights, and A's, as pairs (p, p + D) of each 32-bit word.
            unsigned wp[2][VE / 2], ap[MH][VE / 2];
#pragma unroll
            for (int i = 0; i < WU; ++i) {
                const int bb = i / (WU / BPW);
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const unsigned w = reinterpret_cast<const unsigned*>(&raw[u][j])[i];
                    const float z = zr[u][j][bb];
                    if constexpr (FAST) {
                        const unsigned zz = (MAGIC | (unsigned)z) * 0x10001u;
                        const unsigned ss = (unsigned)sc[u][j][bb] * 0x10001u;
#pragma unroll
                        for (int p = 0; p < D; ++p) {
                            const unsigned x = {{name}}_pair<BITS>(w, p);
                            wp[j][i * D + p] = POST ? {{name}}_sub(x, zz) : {{name}}_scale(x, zz, ss);
                        }
                    } else if constexpr (PAIRS) {
                        const float s = {{name}}_f(sc[u][j][bb]), c = -((float)MAGIC_VALUE + z) * s;
#pragma unroll
                        for (int p = 0; p < D; ++p) wp[j][i * D + p] = {{name}}_affine({{name}}_pair<BITS>(w, p), s, c);
                    } else {
                        // 8-bit bf16: byte e under 0x4B is 2^23 + q; less 2^23, q exactly.
                        const float s = {{name}}_f(sc[u][j][bb]), c = -z * s;
                        float f[EPU];
#pragma unroll
                        for (int e = 0; e < EPU; ++e) {
                            const float q = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 | e)) - 8388608.0f;
                            f[e] = fmaf(q, s, c);
                        }
#pragma unroll
                        for (int p = 0; p < D; ++p) wp[j][i * D + p] = {{name}}_pack(f[p], f[p + D]);
                    }
                }
#pragma unroll
                for (int h = 0; h < MH; ++h) {
#pragma unroll
                    for (int p = 0; p < D; ++p) {
                        const int e = i * EPU + p;
                        ap[h][i * D + p] = __byte_perm(av[h][e / 2], av[h][(e + D) / 2], p % 2 == 0 ? 0x5410 : 0x7632);
                    }
                }
            }
            float part[MH][4];
#pragma unroll
            for (int h = 0; h < MH; ++h) {
#pragma unroll
                for (int e = 0; e < 4; ++e) part[h][e] = 0.0f;
            }
            float (*sum)[4] = POST ? part : acc;
#pragma unroll
            for (int q = 0; q < VE / 4; ++q) {
#pragma unroll
                for (int h = 0; h < MH; ++h) {
                    {{name}}_mma(sum[h], wp[0][2 * q], wp[1][2 * q], wp[0][2 * q + 1], wp[1][2 * q + 1],
                                 ap[h][2 * q], ap[h][2 * q + 1]);
                }
            }
            if constexpr (POST) {
                // part[h][e] sums column n0 + g + 8 (e / 2): this lane's column e / 2.
                const float s0 = {{name}}_f(sc[u][0][0]), s1 = {{name}}_f(sc[u][1][0]);
#pragma unroll
                for (int h = 0; h < MH; ++h) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[h][e] = fmaf(e < 2 ? s0 : s1, part[h][e], acc[h][e]);
                }
            }
        }
    }
    if constexpr (S > 1) {
        __shared__ float red[S > 1 ? S - 1 : 1][MH * 4][32];
        if (warp > 0) {
#pragma unroll
            for (int h = 0; h < MH; ++h) {
#pragma unroll
                for (int e = 0; e < 4; ++e) red[warp - 1][h * 4 + e][lane] = acc[h][e];
            }
        }
        __syncthreads();
        if (warp > 0) return;
#pragma unroll
        for (int w = 0; w < S - 1; ++w) {
#pragma unroll
            for (int h = 0; h < MH; ++h) {
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[h][e] += red[w][h * 4 + e][lane];
            }
        }
    }
    // acc[h][e] is y[8h + 2t + e % 2, n0 + g + 8 (e / 2)] (the mma's accumulator layout).
#pragma unroll
    for (int h = 0; h < MH; ++h) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = 8 * h + 2 * t + (e & 1);
            const int n = n0 + g + 8 * (e >> 1);
            if (m < M && n < N) {
                float v = acc[h][e];
{{bias}}                y[(long long)m * N + n] = {{store}};
            }
        }
    }
}
