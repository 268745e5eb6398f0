// Flash attention on tensor cores ({{dtype}}), pipelined: one block of {{threads}} threads
// per (batch, query head, {{bm}} query rows), a warp per 16 rows. K and V stream through
// dynamic shared memory {{bn}} keys at a time in two stages: cp.async fetches tile t + 1
// while the warps compute on tile t, so the loads' latency hides behind the MMAs.
// Fragments come from shared memory by ldmatrix (Q and K plain, V transposed), and
// S = Q K^T and O += P V are mma.sync m16n8k16 ({{dtype}} in, fp32 accumulate): the S
// accumulator's layout is the A operand's, so P never leaves registers. Online softmax
// with fp32 running max and sum per row (the sum of P as rounded for the product); O is
// divided by the sum and rounded once at the store. The head size {{d}} is zero-padded
// to {{dp}} (rows of {{ld}} elements: ldmatrix rows fall in distinct banks); keys and
// queries past the sequence are zero rows and masked.
__device__ __forceinline__ void {{name}}_cp16(unsigned dst, const void* src, bool in) {
    // 16 bytes from global to shared, zero-filled when `in` is false (src-size 0).
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(in ? 16 : 0));
}

// Two floats as one register of the A operand (the lower column in the low half).
__device__ __forceinline__ unsigned {{name}}_pack(float lo, float hi) {
    {{pack_t}} v = {{pack_fn}}(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// Rows r0 .. r0 + ROWS of an n-row matrix (rows LDG elements apart, {{d}} used) into a
// [ROWS][{{ld}}] tile at `s`, 8 elements per cp.async; zeros past row n and column {{d}}.
template <int ROWS, int LDG>
__device__ __forceinline__ void {{name}}_fetch({{t}}* s, const {{t}}* __restrict__ g, int r0, int n) {
    constexpr int CPR = {{dp}} / 8;
    for (int c = threadIdx.x; c < ROWS * CPR; c += {{threads}}) {
        const int r = c / CPR, col = (c % CPR) * 8;
        const bool in = r0 + r < n && col < {{d}};
        // Out-of-range chunks read nothing; point them at the tile's first element.
        const {{t}}* src = in ? g + (long long)(r0 + r) * LDG + col : g;
        {{name}}_cp16(gopt_smem_addr(s + r * {{ld}} + col), src, in);
    }
}

extern "C" __global__ void __launch_bounds__({{threads}}, 1) {{name}}({{params}}) {
    constexpr int SQ = {{sq}}, SKV = {{skv}}, D = {{d}}, DP = {{dp}}, LD = {{ld}};
    constexpr int BM = {{bm}}, BN = {{bn}}, QT = {{qt}}, HQ = {{hq}}, HK = {{hk}};
    constexpr float SCALE = {{scale}};
    constexpr int QI = {{qi}}, KI = {{ki}}, OI = {{oi}};
    constexpr float LOG2E = 1.4426950408889634f;
    const float NEG = __int_as_float(0xff800000);
    // Q, then two stages of K and V.
    extern __shared__ __align__(16) unsigned char {{name}}_smem[];
    {{t}}* qs = reinterpret_cast<{{t}}*>({{name}}_smem);
    {{t}}* ks0 = qs + BM * LD;
    {{t}}* vs0 = ks0 + 2 * BN * LD;
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
    const int kv_end = {{kv_end}};
    const int tiles = (kv_end + BN - 1) / BN;
    {{name}}_fetch<BM, QI>(qs, qg, q0, SQ);
    {{name}}_fetch<BN, KI>(ks0, kg, 0, SKV);
    {{name}}_fetch<BN, KI>(vs0, vg, 0, SKV);
    asm volatile("cp.async.commit_group;\n" ::);
    // ldmatrix addresses: lane l supplies row l % 8 of matrix l / 8.
    const int lr = lane & 7, lm = lane >> 3;
    unsigned qf[DP / 16][4];
    float o[DP / 8][4];
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float mrun[2] = {NEG, NEG}, lrun[2] = {0.0f, 0.0f};
    for (int t = 0; t < tiles; ++t) {
        const int n0 = t * BN;
        if (t + 1 < tiles) {
            const int st = (t + 1) & 1;
            {{name}}_fetch<BN, KI>(ks0 + st * BN * LD, kg, n0 + BN, SKV);
            {{name}}_fetch<BN, KI>(vs0 + st * BN * LD, vg, n0 + BN, SKV);
            asm volatile("cp.async.commit_group;\n" ::);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        __syncthreads();
        if (t == 0) {
            // Q's A fragments: matrices (rows 0-7, 8-15) x (k 0-7, 8-15).
#pragma unroll
            for (int kc = 0; kc < DP / 16; ++kc) {
                const {{t}}* p = qs + (warp * 16 + (lm & 1) * 8 + lr) * LD + kc * 16 + (lm >> 1) * 8;
                gopt_ldsm_x4(qf[kc], gopt_smem_addr(p));
            }
        }
{{mask_tile}}        const {{t}}* ks = ks0 + (t & 1) * BN * LD;
        const {{t}}* vs = vs0 + (t & 1) * BN * LD;
        // S = Q K^T: s[nt] holds rows (g, g + 8) x keys n0 + nt * 8 + tg * 2 + (0, 1).
        float s[BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kc = 0; kc + 1 < DP / 16; kc += 2) {
                // Keys nt * 8 .. + 7 by head columns kc * 16 .. + 31: b0, b1 of kc and kc + 1.
                unsigned kb[4];
                gopt_ldsm_x4(kb, gopt_smem_addr(ks + (nt * 8 + lr) * LD + kc * 16 + lm * 8));
                const unsigned b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
                gopt_mma_{{ptx}}(s[nt], qf[kc], b0);
                gopt_mma_{{ptx}}(s[nt], qf[kc + 1], b1);
            }
            if ((DP / 16) % 2 == 1) {
                constexpr int kc = DP / 16 - 1;
                const {{t}}* p = ks + (nt * 8 + g) * LD + kc * 16 + tg * 2;
                const unsigned b[2] = {*reinterpret_cast<const unsigned*>(p),
                                       *reinterpret_cast<const unsigned*>(p + 8)};
                gopt_mma_{{ptx}}(s[nt], qf[kc], b);
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
            for (int e = 0; e < 4; ++e) s[nt][e] = exp2f((s[nt][e] - mu[e >> 1]) * LOG2E);
        }
#pragma unroll
        for (int dt = 0; dt < DP / 8; ++dt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) o[dt][e] *= alpha[e >> 1];
        }
        // O += P V: keys kc * 16 .. + 15 of P are S tiles 2 kc and 2 kc + 1.
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            unsigned a[4];
            a[0] = {{name}}_pack(s[2 * kc][0], s[2 * kc][1]);
            a[1] = {{name}}_pack(s[2 * kc][2], s[2 * kc][3]);
            a[2] = {{name}}_pack(s[2 * kc + 1][0], s[2 * kc + 1][1]);
            a[3] = {{name}}_pack(s[2 * kc + 1][2], s[2 * kc + 1][3]);
            // The row sums of P as the P V product sees it (rounded to {{dtype}}), added to
            // lrun by an MMA with a column of ones, so the weights O is divided by sum to
            // one; every thread of the quad gets its rows' whole sums.
            float ls[4] = {lrun[0], lrun[0], lrun[1], lrun[1]};
            const unsigned ones[2] = { {{one}}, {{one}} };
            gopt_mma_{{ptx}}(ls, a, ones);
            lrun[0] = ls[0];
            lrun[1] = ls[2];
#pragma unroll
            for (int dt = 0; dt < DP / 8; dt += 2) {
                // Keys (0-7, 8-15) x head columns (dt, dt + 1) * 8, transposed: b0, b1 of
                // dt and of dt + 1.
                unsigned vb[4];
                gopt_ldsm_x4_trans(vb, gopt_smem_addr(vs + (kc * 16 + (lm & 1) * 8 + lr) * LD + (dt + (lm >> 1)) * 8));
                const unsigned b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
                gopt_mma_{{ptx}}(o[dt], a, b0);
                gopt_mma_{{ptx}}(o[dt + 1], a, b1);
            }
        }
        // Every warp is done with this stage before the next iteration refills it.
        __syncthreads();
    }
    // A fully masked row has sum 0 and gives zeros, as the reference.
#pragma unroll
    for (int r = 0; r < 2; ++r) lrun[r] = lrun[r] > 0.0f ? 1.0f / lrun[r] : 0.0f;
    // Column pairs (tg * 2, + 1) of each row as one 4-byte store.
#pragma unroll
    for (int dt = 0; dt < DP / 8; ++dt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = r == 0 ? ia : ib;
            const int c = dt * 8 + tg * 2;
            if (i < SQ && c < D) {
                *reinterpret_cast<unsigned*>(og + (long long)i * OI + c) =
                    {{name}}_pack(o[dt][2 * r] * lrun[r], o[dt][2 * r + 1] * lrun[r]);
            }
        }
    }
}
