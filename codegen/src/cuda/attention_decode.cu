// Flash decoding ({{dtype}} data on {{engine}}, fp32 math): {{rows}} query rows per KV head
// ({{group}} query heads x {{sq}} rows) against {{keys}} keys. One block of {{threads}} threads per
// (batch, KV head, {{rb}} of those rows, split of the keys): every query head a KV head serves
// is in the same block, so each K and V row is read from memory once for all of them. The
// {{splits}} splits of one (batch, KV head, rows) are one thread-block cluster, {{kps}} keys
// each. Each of the {{warps}} warps streams every {{warps}}th tile of {{tk}} keys of its split
// ({{step}} tile(s) a step, {{pf}} step(s) ahead prefetched into L2, and on tensor cores the
// next step loading into registers while one is computed when both fit) with its own
// online softmax (fp32 running max and sum per row, fp32 accumulator). The warps combine in
// shared memory, the blocks of a cluster through distributed shared memory, and the output
// is rounded once at the store. A row whose keys are all masked gives zeros.
namespace {{name}}_ns {
typedef {{t}} T;
constexpr int SQ = {{sq}}, N = {{keys}}, D = {{d}}, DP = {{dp}}, R = {{rows}}, RB = {{rb}};
constexpr int G = {{group}}, HK = {{hk}}, RC = {{chunks}}, S = {{splits}}, KPS = {{kps}};
constexpr int W = {{warps}}, THREADS = 32 * W, TK = {{tk}}, PF = {{pf}};
// Elements per vector access: every row start and column offset read is a multiple of it.
constexpr int VW = {{vw}};
// L2 lines of one K or V row a prefetch touches (one more when rows may straddle lines).
constexpr int LINES = {{lines}};
constexpr float SCALE = {{scale}};
// Element strides between batches, heads and rows, and the first elements.
constexpr long long QB = {{qb}}, QH = {{qh}}, QI = {{qi}}, QF = {{qf}};
constexpr long long KB = {{kb}}, KH = {{kh}}, KI = {{ki}}, KF = {{kf}};
constexpr long long VB = {{vb}}, VH = {{vh}}, VI = {{vi}}, VF = {{vf}};
constexpr long long OB = {{ob}}, OH = {{oh}}, OI = {{oi}};
// Shared memory, floats: the warps' partial accumulators [W][RB][LDO], maxima and sums
// [W][RB], then the block's maxima and sums [RB] (the CUDA-core loop's Q and P tiles
// before that).
constexpr int LDO = DP + 1;
constexpr int SMEM = {{smem}};
// Shared memory, floats, the other blocks of a cluster write into: a share of the rows'
// columns from each block, and each block's maxima and sums per row.
constexpr int RECV = {{recv}};
#if __CUDA_ARCH__ >= 900
constexpr int RANKS = S;
#else
// No clusters before sm_90: the first block of each cluster's worth takes every key.
constexpr int RANKS = 1;
#endif

// Query head and query row of row `rho` of a KV head's rows (rows past R repeat the last,
// so their reads stay in bounds; they are never stored).
struct Row {
    int h, i;
};
__device__ __forceinline__ Row row_of(int kvh, int rho) {
    rho = rho < R ? rho : R - 1;
    return {kvh * G + rho / SQ, rho % SQ};
}

// The mask's bias at (batch b, query head h, query row i, key j), broadcast as the reference.
__device__ __forceinline__ float bias({{mask_param}}int b, int h, int i, int j) {
    [[maybe_unused]] const float NEG = __int_as_float(0xff800000);
{{mask_base}}
    return 0.0f{{bias}};
}

// Brings the K and V rows of the tile at key j0 (up to key k1) into L2, LINES per row.
__device__ __forceinline__ void prefetch(const T* kg, const T* vg, int j0, int k1, int lane) {
    constexpr int ROWB = D * (int)sizeof(T);
    for (int x = lane; x < 2 * TK * LINES; x += 32) {
        const int row = x / LINES, line = x % LINES, j = j0 + row % TK;
        if (j < k1) {
            const T* r = row < TK ? kg + (long long)j * KI : vg + (long long)j * VI;
            const char* p = reinterpret_cast<const char*>(r) + min(line * 128, ROWB - 1);
            asm volatile("prefetch.L2 [%0];" ::"l"(p));
        }
    }
}

__device__ __forceinline__ void store(T* __restrict__ out, int b, Row r, int d, float acc, float sum) {
    out[b * OB + r.h * OH + r.i * OI + d] = {{store}}(sum > 0.0f ? acc / sum : 0.0f);
}

#if {{mma}}
// Tensor cores. Per 16-key tile, S^T = K Q^T (keys x rows) and O^T += V^T P^T (head
// columns x rows) are mma.sync m16n8k16 products, 8 query rows per n-tile. The head
// columns are permuted (the same way for Q and K, so the dot products are unchanged) so
// that each thread reads contiguous 16-byte runs of its K, Q and V rows straight into the
// fragments: K and Q columns 32 li + 8 tg .. + 7 are k-chunks 2 li and 2 li + 1 of quad
// position tg; V columns 64 li + 8 g .. + 7 are m-tiles 4 li .. 4 li + 3 of group g (two
// columns each, paired across keys with a byte permute). The score accumulator is
// transposed into P^T's B fragment in registers (movmatrix), so P never leaves them.
typedef unsigned short U16;
constexpr int U = {{step}};
// Whether two steps fit in registers (else each step loads, then computes).
constexpr bool DOUBLE = {{double}};
constexpr float LOG2E = 1.4426950408889634f;
constexpr int NT = RB / 8, KC = DP / 16, KW = DP / 8, MT = DP / 16;
constexpr int KL = KC / 2, VL = MT / 4, VR = MT % 4;

__device__ __forceinline__ void mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                    unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.{{ptx}}.{{ptx}}.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats as one register (the lower column in the low half).
__device__ __forceinline__ unsigned pack(float lo, float hi) {
    {{pack_t}} v = {{pack_fn}}(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// The 8x8 matrix whose row lane / 4, columns 2 (lane % 4) + (0, 1) this thread holds,
// transposed.
__device__ __forceinline__ unsigned trans(unsigned x) {
    unsigned y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}

// Columns c .. c + NV - 1 of a row as NV / 2 words (the lower column in the low half), in
// accesses of A columns (A divides NV, c and VW); zeros past column D and where !ok. With
// D == DP every read of the products lies inside the row, so only `ok` predicates it.
template <int NV>
__device__ __forceinline__ void ld(unsigned* w, const U16* __restrict__ row, int c, bool ok) {
    constexpr int A = (VW >= 8 && NV % 8 == 0) ? 8 : (VW >= 4 && NV % 4 == 0) ? 4 : VW >= 2 ? 2 : 1;
    if (D == DP || c + NV <= D) {
#pragma unroll
        for (int x = 0; x < NV / A; ++x) {
            const U16* p = row + c + A * x;
            if constexpr (A == 8) {
                uint4 u = make_uint4(0u, 0u, 0u, 0u);
                if (ok) u = *reinterpret_cast<const uint4*>(p);
                w[4 * x] = u.x, w[4 * x + 1] = u.y, w[4 * x + 2] = u.z, w[4 * x + 3] = u.w;
            } else if constexpr (A == 4) {
                uint2 u = make_uint2(0u, 0u);
                if (ok) u = *reinterpret_cast<const uint2*>(p);
                w[2 * x] = u.x, w[2 * x + 1] = u.y;
            } else if constexpr (A == 2) {
                w[x] = ok ? *reinterpret_cast<const unsigned*>(p) : 0u;
            } else {
                const unsigned h = ok ? p[0] : 0u;
                w[x / 2] = x % 2 ? w[x / 2] | (h << 16) : h;
            }
        }
    } else {
#pragma unroll
        for (int x = 0; x < NV / 2; ++x) {
            const unsigned lo = ok && c + 2 * x < D ? row[c + 2 * x] : 0u;
            const unsigned hi = ok && c + 2 * x + 1 < D ? row[c + 2 * x + 1] : 0u;
            w[x] = lo | (hi << 16);
        }
    }
}

// A K or Q row for quad position tg: words 2 kc and 2 kc + 1 are k-chunk kc's two
// registers.
__device__ __forceinline__ void ld_k(unsigned* w, const U16* row, int tg, bool ok) {
#pragma unroll
    for (int li = 0; li < KL; ++li) ld<8>(w + 4 * li, row, 32 * li + 8 * tg, ok);
    if constexpr (KC % 2 == 1) ld<4>(w + 4 * KL, row, 32 * KL + 4 * tg, ok);
}

// A V row for group g: word mt holds columns vcol(mt, g) (low half) and vcol(mt, g) + 1.
__device__ __forceinline__ void ld_v(unsigned* w, const U16* row, int g, bool ok) {
#pragma unroll
    for (int li = 0; li < VL; ++li) ld<8>(w + 4 * li, row, 64 * li + 8 * g, ok);
    if constexpr (VR > 0) ld<2 * VR>(w + 4 * VL, row, 64 * VL + 2 * VR * g, ok);
}

__device__ __forceinline__ int vcol(int mt, int g) {
    return mt / 4 < VL ? 64 * (mt / 4) + 8 * g + 2 * (mt % 4) : 64 * VL + 2 * VR * g + 2 * (mt % 4);
}

// One tile's K rows g, g + 8 and V rows 2 tg, 2 tg + 1, 2 tg + 8, 2 tg + 9.
struct Tile {
    unsigned k[2][KW];
    unsigned v[4][MT];
};

__device__ __forceinline__ void load(Tile& t, const U16* kg, const U16* vg, int j0, int k1, int g, int tg) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
        const int j = j0 + g + 8 * x;
        ld_k(t.k[x], kg + (long long)j * KI, tg, j < k1);
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
        const int j = j0 + 2 * tg + (x & 1) + 8 * (x >> 1);
        ld_v(t.v[x], vg + (long long)j * VI, g, j < k1);
    }
}

// This warp's share of keys [k0, k1): its maxima, sums and accumulators go to the
// partials in shared memory. Step s of the warp is tiles (s U + u) W + warp, u < U (so
// the block's warps read one contiguous run of keys per step); tiles past the keys load
// nothing and score -inf. With DOUBLE two steps are in registers: one computed, the next
// loading.
__device__ __forceinline__ void accumulate(const T* __restrict__ q, const T* __restrict__ k,
                                           const T* __restrict__ v, {{mask_param}}int b, int kvh,
                                           int r0, int k0, int k1, float* smem) {
    const float NEG = __int_as_float(0xff800000);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    const T* kt = k + KF + b * KB + kvh * KH;
    const T* vt = v + VF + b * VB + kvh * VH;
    const U16* kg = reinterpret_cast<const U16*>(kt);
    const U16* vg = reinterpret_cast<const U16*>(vt);
    // Q^T's B fragments (row 8 nt + g), and the query head and row of the scores this
    // thread holds (rows 8 nt + 2 tg + e).
    unsigned qf[NT][KW];
    int rh[NT][2], ri[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const Row r = row_of(kvh, r0 + 8 * nt + g);
        const T* qrow = q + QF + b * QB + r.h * QH + r.i * QI;
        ld_k(qf[nt], reinterpret_cast<const U16*>(qrow), tg, true);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const Row s = row_of(kvh, r0 + 8 * nt + 2 * tg + e);
            rh[nt][e] = s.h;
            ri[nt][e] = s.i;
        }
    }
    float o[NT][MT][4], ls[NT][4], m[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            ls[nt][e] = 0.0f;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) o[nt][mt][e] = 0.0f;
        }
        m[nt][0] = m[nt][1] = NEG;
    }
    const int tiles = k1 > k0 ? (k1 - k0 + TK - 1) / TK : 0;
    const int steps = (tiles + U * W - 1) / (U * W);
    auto first = [&](int s, int u) { return k0 + ((s * U + u) * W + warp) * TK; };
    auto fetch = [&](Tile(&t)[U], int s) {
#pragma unroll
        for (int u = 0; u < U; ++u) load(t[u], kg, vg, first(s, u), k1, g, tg);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (PF > 0) prefetch(kt, vt, first(s + PF, u), k1, lane);
        }
    };
    auto step = [&](const Tile(&t)[U], int s) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            // Scores: x[u][2 kk + e] is key first(s, u) + g + 8 kk, row 8 nt + 2 tg + e.
            float x[U][4];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                x[u][0] = x[u][1] = x[u][2] = x[u][3] = 0.0f;
#pragma unroll
                for (int kc = 0; kc < KC; ++kc) {
                    mma(x[u], t[u].k[0][2 * kc], t[u].k[1][2 * kc], t[u].k[0][2 * kc + 1],
                        t[u].k[1][2 * kc + 1], qf[nt][2 * kc], qf[nt][2 * kc + 1]);
                }
            }
            float mu[2], alpha[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int i = ri[nt][e];
                float mx = m[nt][e];
#pragma unroll
                for (int u = 0; u < U; ++u) {
#pragma unroll
                    for (int kk = 0; kk < 2; ++kk) {
                        const int j = first(s, u) + g + 8 * kk;
                        const bool ok = j < k1{{causal_ok}};
                        float& y = x[u][2 * kk + e];
                        y = ok ? y * SCALE + bias({{mask_arg}}b, rh[nt][e], i, j) : NEG;
                        mx = fmaxf(mx, y);
                    }
                }
                // The row's max over the 8 threads of this quad position; a row masked
                // so far keeps max -inf and exponentiates against 0 (exp gives 0, not NaN).
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
                mu[e] = mx == NEG ? 0.0f : mx;
                alpha[e] = exp2f((m[nt][e] - mu[e]) * LOG2E);
                m[nt][e] = mx;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                ls[nt][e] *= alpha[e & 1];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) o[nt][mt][e] *= alpha[e & 1];
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                // P as rounded for the product; P^T's B fragment is the transpose.
                const unsigned b0 = trans(pack(exp2f((x[u][0] - mu[0]) * LOG2E), exp2f((x[u][1] - mu[1]) * LOG2E)));
                const unsigned b1 = trans(pack(exp2f((x[u][2] - mu[0]) * LOG2E), exp2f((x[u][3] - mu[1]) * LOG2E)));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    // Keys (2 tg, 2 tg + 1) and (2 tg + 8, 2 tg + 9) paired per column.
                    const unsigned w0 = t[u].v[0][mt], w1 = t[u].v[1][mt];
                    const unsigned w2 = t[u].v[2][mt], w3 = t[u].v[3][mt];
                    mma(o[nt][mt], __byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632),
                        __byte_perm(w2, w3, 0x5410), __byte_perm(w2, w3, 0x7632), b0, b1);
                }
                // The row sums of P as the product sees it (a 16x16 A of ones): every
                // thread of the quad position holds its rows' whole sums.
                mma(ls[nt], {{one}}, {{one}}, {{one}}, {{one}}, b0, b1);
            }
        }
    };
    Tile a[U];
    fetch(a, 0);
    if constexpr (DOUBLE) {
        Tile c[U];
        for (int s = 0; s < steps; s += 2) {
            fetch(c, s + 1);
            step(a, s);
            if (s + 1 >= steps) break;
            fetch(a, s + 2);
            step(c, s + 1);
        }
    } else {
        for (int s = 0; s < steps; ++s) {
            if (s > 0) fetch(a, s);
            step(a, s);
        }
    }
    float* part_o = smem;
    float* part_m = smem + W * RB * LDO;
    float* part_l = part_m + W * RB;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r = warp * RB + 8 * nt + 2 * tg + (e & 1);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) part_o[r * LDO + vcol(mt, g) + (e >> 1)] = o[nt][mt][e];
            if (g == 0 && e < 2) {
                part_m[r] = m[nt][e];
                part_l[r] = ls[nt][e];
            }
        }
    }
}
#else
// CUDA cores. Per 32-key tile, lane l scores key l against every row (Q in shared memory,
// read as broadcasts), the row's max is a warp reduction, and P goes through shared
// memory for O += P V, where lane l accumulates head columns l, l + 32, ...
constexpr int EC = DP / 32;

// Four columns of a row from column c (a float4 when aligned); zeros past column D and
// where !ok.
__device__ __forceinline__ float4 ld4(const float* __restrict__ row, int c, bool ok) {
    if (VW >= 4 && ok && c + 4 <= D) return *reinterpret_cast<const float4*>(row + c);
    float4 f;
    f.x = ok && c < D ? row[c] : 0.0f;
    f.y = ok && c + 1 < D ? row[c + 1] : 0.0f;
    f.z = ok && c + 2 < D ? row[c + 2] : 0.0f;
    f.w = ok && c + 3 < D ? row[c + 3] : 0.0f;
    return f;
}

__device__ __forceinline__ void accumulate(const T* __restrict__ q, const T* __restrict__ k,
                                           const T* __restrict__ v, {{mask_param}}int b, int kvh,
                                           int r0, int k0, int k1, float* smem) {
    const float NEG = __int_as_float(0xff800000);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const T* kg = k + KF + b * KB + kvh * KH;
    const T* vg = v + VF + b * VB + kvh * VH;
    float* qs = smem;                             // [RB][DP]
    float* ps = smem + RB * DP + warp * RB * 32;  // this warp's [RB][32]
    for (int x = threadIdx.x; x < RB * DP; x += THREADS) {
        const int r = x / DP, d = x % DP;
        const Row rr = row_of(kvh, r0 + r);
        qs[x] = d < D ? q[QF + b * QB + rr.h * QH + rr.i * QI + d] : 0.0f;
    }
    __syncthreads();
    float o[RB][EC], m[RB], l[RB];
#pragma unroll
    for (int r = 0; r < RB; ++r) {
        m[r] = NEG;
        l[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < EC; ++e) o[r][e] = 0.0f;
    }
    const int tiles = k1 > k0 ? (k1 - k0 + TK - 1) / TK : 0;
#pragma unroll
    for (int s = 0; s < PF; ++s) prefetch(kg, vg, k0 + (warp + s * W) * TK, k1, lane);
    for (int t = warp; t < tiles; t += W) {
        const int j0 = k0 + t * TK, j = j0 + lane;
        if (PF > 0) prefetch(kg, vg, k0 + (t + PF * W) * TK, k1, lane);
        float s[RB];
#pragma unroll
        for (int r = 0; r < RB; ++r) s[r] = 0.0f;
        const float* krow = kg + (long long)j * KI;
#pragma unroll 8
        for (int c = 0; c < D; c += 4) {
            const float4 kv = ld4(krow, c, j < k1);
#pragma unroll
            for (int r = 0; r < RB; ++r) {
                const float4 qv = *reinterpret_cast<const float4*>(qs + r * DP + c);
                s[r] = fmaf(qv.x, kv.x, fmaf(qv.y, kv.y, fmaf(qv.z, kv.z, fmaf(qv.w, kv.w, s[r]))));
            }
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const Row rr = row_of(kvh, r0 + r);
            const int i = rr.i;
            const bool ok = j < k1{{causal_ok}};
            const float x = ok ? s[r] * SCALE + bias({{mask_arg}}b, rr.h, i, j) : NEG;
            // A row masked so far keeps max -inf and exponentiates against 0 (exp gives 0).
            float mx = x;
#pragma unroll
            for (int sh = 16; sh > 0; sh >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, sh));
            mx = fmaxf(mx, m[r]);
            const float mu = mx == NEG ? 0.0f : mx;
            const float alpha = expf(m[r] - mu);
            m[r] = mx;
            const float p = expf(x - mu);
            l[r] = l[r] * alpha + p;
#pragma unroll
            for (int e = 0; e < EC; ++e) o[r][e] *= alpha;
            ps[r * 32 + lane] = p;
        }
        __syncwarp();
#pragma unroll 4
        for (int kk = 0; kk < TK; ++kk) {
            const int jk = j0 + kk;
            const float* vrow = vg + (long long)jk * VI;
#pragma unroll
            for (int e = 0; e < EC; ++e) {
                const int c = lane + 32 * e;
                const float x = jk < k1 && c < D ? vrow[c] : 0.0f;
#pragma unroll
                for (int r = 0; r < RB; ++r) o[r][e] = fmaf(ps[r * 32 + kk], x, o[r][e]);
            }
        }
        __syncwarp();
    }
    // Q and P are dead: the partials take their place.
    __syncthreads();
    float* part_o = smem;
    float* part_m = smem + W * RB * LDO;
    float* part_l = part_m + W * RB;
#pragma unroll
    for (int r = 0; r < RB; ++r) {
#pragma unroll
        for (int e = 0; e < EC; ++e) part_o[(warp * RB + r) * LDO + lane + 32 * e] = o[r][e];
        float sum = l[r];
#pragma unroll
        for (int sh = 16; sh > 0; sh >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, sh);
        if (lane == 0) {
            part_m[warp * RB + r] = m[r];
            part_l[warp * RB + r] = sum;
        }
    }
}
#endif

#if __CUDA_ARCH__ >= 900
// Cluster barrier halves: every thread of the cluster's blocks arrives, then waits for
// all; with release/acquire, shared memory written before the arrival (in any block of
// the cluster) is visible after the wait.
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Stores x at `p` (in this block's shared memory) of the cluster's block `rank`.
__device__ __forceinline__ void st_peer(float* p, int rank, float x) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    unsigned ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(ra), "f"(x) : "memory");
}
#endif

// The warps' partials (in `smem`) into the block's: each is weighted by exp(its max -
// the max). One split stores the rows; with several, block q of the cluster gathers
// every block's share q of the rows' columns (`recv`) and stores that share.
__device__ __forceinline__ void combine(float* smem, float* recv, T* __restrict__ out, int b, int kvh, int r0,
                                        int rank) {
    const float NEG = __int_as_float(0xff800000);
    float* part_o = smem;
    float* part_m = smem + W * RB * LDO;
    float* part_l = part_m + W * RB;
    float* blk_m = part_l + W * RB;
    float* blk_l = blk_m + RB;
    const int rv = min(RB, R - r0);
    __syncthreads();
    // Per row: the block's max and sum; each warp's weight replaces its max.
    for (int r = threadIdx.x; r < rv; r += THREADS) {
        float mx = NEG;
#pragma unroll
        for (int w = 0; w < W; ++w) mx = fmaxf(mx, part_m[w * RB + r]);
        const float mu = mx == NEG ? 0.0f : mx;
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            const float e = expf(part_m[w * RB + r] - mu);
            part_m[w * RB + r] = e;
            sum += e * part_l[w * RB + r];
        }
        blk_m[r] = mx;
        blk_l[r] = sum;
    }
    __syncthreads();
    // Share q of the rv x D outputs: elements [q per, (q + 1) per) in row-major order.
    const int per = (rv * D + RANKS - 1) / RANKS;
#if __CUDA_ARCH__ >= 900
    if (RANKS > 1) {
        // Every block has started (the arrival at the kernel's start): push this block's
        // maxima, sums and weighted columns to the blocks whose shares they fall in.
        cluster_wait();
        for (int x = threadIdx.x; x < RANKS * rv; x += THREADS) {
            const int q = x / rv, r = x % rv;
            st_peer(recv + RANKS * per + rank * RB + r, q, blk_m[r]);
            st_peer(recv + RANKS * per + RANKS * RB + rank * RB + r, q, blk_l[r]);
        }
    }
#endif
    for (int x = threadIdx.x; x < rv * D; x += THREADS) {
        const int r = x / D, d = x % D;
        float acc = 0.0f;
#pragma unroll
        for (int w = 0; w < W; ++w) acc += part_m[w * RB + r] * part_o[(w * RB + r) * LDO + d];
        if (RANKS == 1) {
            store(out, b, row_of(kvh, r0 + r), d, acc, blk_l[r]);
        } else {
#if __CUDA_ARCH__ >= 900
            st_peer(recv + rank * per + x % per, x / per, acc);
#endif
        }
    }
#if __CUDA_ARCH__ >= 900
    if (RANKS > 1) {
        cluster_arrive();
        cluster_wait();
        // Nothing reads or writes another block's shared memory from here on.
        const float* in_m = recv + RANKS * per;
        const float* in_l = in_m + RANKS * RB;
        const int end = min(rv * D, (rank + 1) * per);
        for (int x = rank * per + threadIdx.x; x < end; x += THREADS) {
            const int r = x / D, d = x % D;
            float mx = NEG;
#pragma unroll
            for (int q = 0; q < RANKS; ++q) mx = fmaxf(mx, in_m[q * RB + r]);
            const float mu = mx == NEG ? 0.0f : mx;
            float acc = 0.0f, sum = 0.0f;
#pragma unroll
            for (int q = 0; q < RANKS; ++q) {
                const float e = expf(in_m[q * RB + r] - mu);
                acc += e * recv[q * per + x - rank * per];
                sum += e * in_l[q * RB + r];
            }
            store(out, b, row_of(kvh, r0 + r), d, acc, sum);
        }
    }
#endif
}

__device__ __forceinline__ void run({{params}}) {
    __shared__ __align__(16) float smem[SMEM];
    // What the cluster's blocks push here: their weighted columns of this block's share,
    // then their maxima and sums per row.
    __shared__ float recv[RECV];
    const int rank = blockIdx.x % S;
    if (rank >= RANKS) return;
#if __CUDA_ARCH__ >= 900
    // Distributed shared memory may be written once every block of the cluster has
    // started: arrive now, wait just before the first such write.
    if (RANKS > 1) cluster_arrive();
#endif
    const int rest = blockIdx.x / S, chunk = rest % RC, kvh = (rest / RC) % HK, b = rest / (RC * HK);
    const int k0 = RANKS == 1 ? 0 : rank * KPS;
    const int k1 = RANKS == 1 ? N : min(N, k0 + KPS);
    accumulate(q, k, v, {{mask_arg}}b, kvh, chunk * RB, k0, k1, smem);
    combine(smem, recv, out, b, kvh, chunk * RB, rank);
}
}  // namespace {{name}}_ns

extern "C" __global__ void __launch_bounds__({{threads}}, 1)
#if __CUDA_ARCH__ >= 900
{{cluster}}
#endif
{{name}}({{params}}) {
    {{name}}_ns::run({{args}});
}
