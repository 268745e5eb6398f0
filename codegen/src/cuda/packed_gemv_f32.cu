// MatMulNBits GEMV on CUDA cores: y[{{m}}, {{n}}] = A · Wᵀ{{formula}}, A f32 [{{m}}, {{k}}], W[n, k] =
// (q − zero point) · scale, q {{bits}}-bit packed [{{n}}, {{blocks}}, {{blob}}] bytes, one scale and
// zero point ({{zero}}) per block of {{block}} along K. fp32 products stay off the tensor cores (tf32
// would round A), so this kernel is the GEMV of gemv.cu over a packed row: each group of {{g}} lanes
// computes a run of {{c}} output column(s) for all {{m}} rows; per pass each lane loads {{u}}
// {{w}}-byte word(s) of each of those columns' rows of B ({{ve}} weights each), all in flight together
// (evict-first: each is read once), with their blocks' scales and zero points. A weight costs two
// instructions before its FMAs: its bits under 0x4B000000 are the float 2^23 + q · 16^p (one LOP3 or
// PRMT; p its nibble position in a 16-bit half word, 0 for bytes), and one FMA by 16^−p less
// 2^23 · 16^−p + z makes that q − z, exactly for an integer z. The lane sums a · (q − z) over a
// block and scales the sums once. A comes through the read-only cache (every warp reads the same
// A); the sums are fp32, reduced over the group with xor shuffles; the epilogue adds the bias. K
// past the last word holding elements below K is never loaded; inside that word A's elements past
// K are read as zero. Groups past column {{n}} re-read the last row and store nothing.

// Nibble P of x (bits 4P to 4P + 3) under 0x4B000000: the float 2^23 + q · 16^P, in one LOP3
// (written in C, ptxas splits it in two, as both constants are immediates).
template <int P>
static __device__ __forceinline__ float {{name}}_nib(unsigned x) {
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(x), "n"(0xF << (4 * P)), "n"(0x4B000000));
    return __uint_as_float(r);
}

// 32-bit word i of a load of B.
static __device__ __forceinline__ unsigned {{name}}_u32(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
static __device__ __forceinline__ unsigned {{name}}_u32(const uint2& v, int i) { return i == 0 ? v.x : v.y; }

// Room for 2 blocks per SM: sized by the block alone, ptxas stops near 64 registers and spills.
extern "C" __global__ void __launch_bounds__({{block_threads}}, 2) {{name}}({{params}}) {
    typedef {{word_t}} word_t;
    typedef {{aword_t}} aword_t;
    constexpr int M = {{m}}, N = {{n}}, K = {{k}};
    constexpr int BITS = {{bits}}, BLOCK = {{block}}, BLOCKS = {{blocks}}, ZROW = {{zrow}};
    // 32-bit words per load of B, elements per 32-bit word and per load, loads per row of B.
    constexpr int WU = {{wu}}, EPU = 32 / BITS, VE = WU * EPU, RW = {{rw}};
    // Loads of a row holding some k < K.
    constexpr int KW = (K + VE - 1) / VE;
    constexpr int G = {{g}}, C = {{c}}, U = {{u}}, STEP = G * U, AE = {{ae}};
    // Blocks one load of B spans (2 only for 4-bit blocks of 16 in 16-byte loads).
    constexpr int BPW = VE > BLOCK ? VE / BLOCK : 1;
    // Zero points: 0 the default 2^(bits − 1), 1 packed u8, 2 floats.
    constexpr int ZF = {{zf}};
    // Nibble positions of a 16-bit half word (4-bit), or 1 (8-bit: bytes sit at 2^23 alone).
    constexpr int P = BITS == 4 ? 4 : 1;
    // Past 4 rows the 32-bit words of a load go one at a time: unrolled, ptxas issues all
    // their loads of A at once, which overflows the registers.
    constexpr int IU = M > 4 ? 1 : WU / BPW;
    {{zp_decl}}
    auto zero = [&](int n, int blk) -> float {
        if constexpr (ZF == 1) {
            const unsigned v = __ldg(zq + (long long)n * ZROW + blk * BITS / 8);
            return (float)((v >> ((blk * BITS) & 7)) & ((1u << BITS) - 1u));
        } else if constexpr (ZF == 2) {
            return __ldg(zf + (long long)n * BLOCKS + blk);
        } else {
            return (float)(1 << (BITS - 1));
        }
    };
    // Whole warps past the last column leave together (shuffles stay warp-uniform).
    const int warp_first = (int)((blockIdx.x * {{block_threads}}u + (threadIdx.x & ~31u)) / G);
    if (warp_first * C >= N) return;
    const int gl = threadIdx.x & (G - 1);
    const int n0 = (int)((blockIdx.x * {{block_threads}}u + threadIdx.x) / G) * C;
    int col[C];
#pragma unroll
    for (int j = 0; j < C; ++j) col[j] = min(n0 + j, N - 1);
    float acc[C][M];
#pragma unroll
    for (int j = 0; j < C; ++j) {
#pragma unroll
        for (int i = 0; i < M; ++i) acc[j][i] = 0.0f;
    }
#pragma unroll 1
    for (int c0 = 0; c0 < KW; c0 += STEP) {
        // Every load of the pass is issued before any is used.
        word_t wb[U][C];
        float sc[U][C][BPW], zr[U][C][BPW];
#pragma unroll
        for (int s = 0; s < U; ++s) {
            const int wd = c0 + s * G + gl;
#pragma unroll
            for (int j = 0; j < C; ++j) {
                wb[s][j] = word_t{};
#pragma unroll
                for (int bb = 0; bb < BPW; ++bb) {
                    sc[s][j][bb] = 0.0f;
                    zr[s][j][bb] = 0.0f;
                }
                if (KW % STEP == 0 || wd < KW) {
                    wb[s][j] = __ldcs(reinterpret_cast<const word_t*>(b) + (long long)col[j] * RW + wd);
#pragma unroll
                    for (int bb = 0; bb < BPW; ++bb) {
                        const int blk = wd * VE / BLOCK + bb;
                        sc[s][j][bb] = __ldg(scales + (long long)col[j] * BLOCKS + blk);
                        zr[s][j][bb] = zero(col[j], blk);
                    }
                }
            }
        }
#pragma unroll
        for (int s = 0; s < U; ++s) {
            const int wd = c0 + s * G + gl;
            if (KW % STEP == 0 || wd < KW) {
#pragma unroll
                for (int bb = 0; bb < BPW; ++bb) {
                    // Sums of a · (q − z) over the block's weights, scaled once it is done.
                    float part[C][M];
#pragma unroll
                    for (int j = 0; j < C; ++j) {
#pragma unroll
                        for (int r = 0; r < M; ++r) part[j][r] = 0.0f;
                    }
#pragma unroll IU
                    for (int i = bb * (WU / BPW); i < (bb + 1) * (WU / BPW); ++i) {
                        float d[C][EPU];
#pragma unroll
                        for (int j = 0; j < C; ++j) {
                            const unsigned w = {{name}}_u32(wb[s][j], i);
                            const float z = zr[s][j][bb];
                            float f[EPU];
                            if constexpr (BITS == 4) {
                                const unsigned hi = w >> 16;
                                f[0] = {{name}}_nib<0>(w);
                                f[1] = {{name}}_nib<1>(w);
                                f[2] = {{name}}_nib<2>(w);
                                f[3] = {{name}}_nib<3>(w);
                                f[4] = {{name}}_nib<0>(hi);
                                f[5] = {{name}}_nib<1>(hi);
                                f[6] = {{name}}_nib<2>(hi);
                                f[7] = {{name}}_nib<3>(hi);
                            } else {
#pragma unroll
                                for (int e = 0; e < EPU; ++e) f[e] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 | e));
                            }
#pragma unroll
                            for (int e = 0; e < EPU; ++e) {
                                // f · 16^−p is 2^23 · 16^−p + q, exactly; an integer zero point
                                // comes off in the same FMA, exactly; a float one after it.
                                const float one = 1.0f / (float)(1 << (4 * (e % P)));
                                d[j][e] = ZF == 2 ? fmaf(f[e], one, -8388608.0f * one) - z
                                                  : fmaf(f[e], one, -(8388608.0f * one + z));
                            }
                        }
                        const int k0 = wd * VE + i * EPU;
#pragma unroll
                        for (int r = 0; r < M; ++r) {
                            alignas(16) float fa[EPU];
                            const aword_t* src = reinterpret_cast<const aword_t*>(a + (long long)r * K + k0);
#pragma unroll
                            for (int x = 0; x < EPU / AE; ++x) {
                                const aword_t v = (K % VE == 0 || k0 + (x + 1) * AE <= K) ? __ldg(src + x) : aword_t{};
                                *reinterpret_cast<aword_t*>(fa + x * AE) = v;
                            }
#pragma unroll
                            for (int j = 0; j < C; ++j) {
#pragma unroll
                                for (int e = 0; e < EPU; ++e) part[j][r] = fmaf(fa[e], d[j][e], part[j][r]);
                            }
                        }
                    }
#pragma unroll
                    for (int j = 0; j < C; ++j) {
#pragma unroll
                        for (int r = 0; r < M; ++r) acc[j][r] = fmaf(sc[s][j][bb], part[j][r], acc[j][r]);
                    }
                }
            }
        }
    }
    // Sum over the group's lanes; each output is finished by one lane of the group.
#pragma unroll
    for (int j = 0; j < C; ++j) {
#pragma unroll
        for (int i = 0; i < M; ++i) {
            float v = acc[j][i];
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            const int n = n0 + j;
            if (gl == (i * C + j) % G && n < N) {
{{bias}}                y[(long long)i * N + n] = v;
            }
        }
    }
}
