// Flash attention on tensor cores ({{dtype}}): one block of {{threads}} threads per (batch,
// query head, {{bm}} query rows), a warp per 16 rows; K and V stream through shared memory
// {{bn}} keys at a time. S = Q K^T and O += P V are mma.sync m16n8k16 ({{dtype}} in, fp32
// accumulate) on fragments in registers: the S accumulator's layout is the A operand's,
// so P never leaves registers. Online softmax with fp32 running max and sum per row; O
// is divided by the sum and rounded once at the store. The head size {{d}} is
// zero-padded to {{dp}} in shared memory (rows of {{ld}} to spread banks); keys and
// queries past the sequence are zero rows and masked.
__device__ __forceinline__ void {{name}}_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.{{ptx}}.{{ptx}}.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of the A operand (the lower column in the low half).
__device__ __forceinline__ unsigned {{name}}_pack(float lo, float hi) {
    {{pack_t}} v = {{pack_fn}}(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// Rows r0 .. r0 + ROWS of an n-row matrix (rows LDG elements apart, {{d}} used) into a
// [ROWS][{{ld}}] tile, {{vw}} elements per access; zeros past row n and past column {{d}} (up to
// {{dp}}).
template <int ROWS, int LDG>
__device__ __forceinline__ void {{name}}_tile({{t}}* s, const {{t}}* __restrict__ g, int r0, int n) {
    constexpr int CPR = {{dp}} / {{vw}};
    for (int c = threadIdx.x; c < ROWS * CPR; c += {{threads}}) {
        const int r = c / CPR, col = (c % CPR) * {{vw}};
        {{vec_t}} x = {};
        if (r0 + r < n && col < {{d}}) {
            x = *reinterpret_cast<const {{vec_t}}*>(g + (long long)(r0 + r) * LDG + col);
        }
        *reinterpret_cast<{{vec_t}}*>(s + r * {{ld}} + col) = x;
    }
}

extern "C" __global__ void __launch_bounds__({{threads}}) {{name}}({{params}}) {
    constexpr int SQ = {{sq}}, SKV = {{skv}}, D = {{d}}, DP = {{dp}}, LD = {{ld}};
    constexpr int BM = {{bm}}, BN = {{bn}}, QT = {{qt}}, HQ = {{hq}}, HK = {{hk}};
    constexpr float SCALE = {{scale}};
    constexpr int QI = {{qi}}, KI = {{ki}}, OI = {{oi}};
    constexpr float LOG2E = 1.4426950408889634f;
    const float NEG = __int_as_float(0xff800000);
    __shared__ __align__(16) {{t}} qs[BM * LD];
    __shared__ __align__(16) {{t}} ks[BN * LD];
    __shared__ __align__(16) {{t}} vs[BN * LD];
    const int tile = blockIdx.x % QT, bh = blockIdx.x / QT;
    const int b = bh / HQ, h = bh % HQ;
    // This block's head of Q and the output (rows QI elements apart) and of K and V (rows
    // KI apart), a KV head serving HQ / HK query heads.
{{bases}}    const int q0 = tile * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tg = lane & 3;
    // The two query rows this thread holds accumulator values of.
    const int ia = q0 + warp * 16 + g, ib = ia + 8;
{{mask_base}}
    {{name}}_tile<BM, QI>(qs, qg, q0, SQ);
    __syncthreads();
    unsigned qf[DP / 16][4];
#pragma unroll
    for (int kc = 0; kc < DP / 16; ++kc) {
        const {{t}}* p = qs + (warp * 16 + g) * LD + kc * 16 + tg * 2;
        qf[kc][0] = *reinterpret_cast<const unsigned*>(p);
        qf[kc][1] = *reinterpret_cast<const unsigned*>(p + 8 * LD);
        qf[kc][2] = *reinterpret_cast<const unsigned*>(p + 8);
        qf[kc][3] = *reinterpret_cast<const unsigned*>(p + 8 * LD + 8);
    }
    float o[DP / 8][4];
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float mrun[2] = {NEG, NEG}, lrun[2] = {0.0f, 0.0f};
    const int kv_end = {{kv_end}};
    for (int n0 = 0; n0 < kv_end; n0 += BN) {
        __syncthreads();
        {{name}}_tile<BN, KI>(ks, kg, n0, SKV);
        {{name}}_tile<BN, KI>(vs, vg, n0, SKV);
        __syncthreads();
        // S = Q K^T: s[nt] holds rows (g, g + 8) x keys n0 + nt * 8 + tg * 2 + (0, 1).
        float s[BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kc = 0; kc < DP / 16; ++kc) {
                const {{t}}* p = ks + (nt * 8 + g) * LD + kc * 16 + tg * 2;
                {{name}}_mma(s[nt], qf[kc], *reinterpret_cast<const unsigned*>(p),
                             *reinterpret_cast<const unsigned*>(p + 8));
            }
        }
        float mx[2] = {mrun[0], mrun[1]};
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = e < 2 ? ia : ib;
                const int j = n0 + nt * 8 + tg * 2 + (e & 1);
                const bool ok = i < SQ && j < SKV{{causal_ok}};
                const float x = ok ? s[nt][e] * SCALE{{bias}} : NEG;
                s[nt][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            }
        }
        // Row max over the quad holding the row; a row masked so far keeps max -inf and
        // exponentiates against 0 (so exp gives 0, never NaN).
        float mu[2], alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            mu[r] = mx[r] == NEG ? 0.0f : mx[r];
            alpha[r] = exp2f((mrun[r] - mu[r]) * LOG2E);
            mrun[r] = mx[r];
            lrun[r] *= alpha[r];
        }
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[nt][e] = exp2f((s[nt][e] - mu[e >> 1]) * LOG2E);
            }
        }
#pragma unroll
        for (int dt = 0; dt < DP / 8; ++dt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) o[dt][e] *= alpha[e >> 1];
        }
        // O += P V: keys kc * 16 .. + 15 of P are S tiles 2 kc and 2 kc + 1; V's B operand
        // pairs keys (tg * 2, tg * 2 + 1) and (+ 8, + 9) of head column dt * 8 + g.
        const unsigned short* vh = reinterpret_cast<const unsigned short*>(vs);
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            unsigned a[4];
            a[0] = {{name}}_pack(s[2 * kc][0], s[2 * kc][1]);
            a[1] = {{name}}_pack(s[2 * kc][2], s[2 * kc][3]);
            a[2] = {{name}}_pack(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            a[3] = {{name}}_pack(s[2 * kc + 1][2], s[2 * kc + 1][3]);
            // The row sums of P as the P V product sees it (rounded to {{dtype}}), added to
            // lrun by an mma with a column of ones, so the weights O is divided by sum to
            // one. Every column of the product, so every thread of the quad, holds its rows'
            // whole sums.
            float ls[4] = {lrun[0], lrun[0], lrun[1], lrun[1]};
            {{name}}_mma(ls, a, {{one}}, {{one}});
            lrun[0] = ls[0];
            lrun[1] = ls[2];
#pragma unroll
            for (int dt = 0; dt < DP / 8; ++dt) {
                const unsigned short* p = vh + (kc * 16 + tg * 2) * LD + dt * 8 + g;
                const unsigned b0 = (unsigned)p[0] | ((unsigned)p[LD] << 16);
                const unsigned b1 = (unsigned)p[8 * LD] | ((unsigned)p[9 * LD] << 16);
                {{name}}_mma(o[dt], a, b0, b1);
            }
        }
    }
    // A fully masked row has sum 0 and gives zeros, as the reference.
#pragma unroll
    for (int r = 0; r < 2; ++r) lrun[r] = lrun[r] > 0.0f ? 1.0f / lrun[r] : 0.0f;
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = e < 2 ? ia : ib;
            const int c = dt * 8 + tg * 2 + (e & 1);
            if (i < SQ && c < D) og[(long long)i * OI + c] = {{store}}(o[dt][e] * lrun[e >> 1]);
        }
    }
}
