// Flash attention on CUDA cores ({{dtype}} data, fp32 math, no TF32): one block of
// {{threads}} threads per (batch, query head, {{bm}} query rows), four threads per row; K
// and V stream through shared memory as fp32, {{bn}} keys at a time (rows of {{ld}}, odd,
// to spread banks). Each thread scores every fourth key of its row and accumulates
// every fourth head column; the row's max and sum are combined over its four threads
// (online softmax, fp32), and O is divided by the sum and rounded once at the store.
extern "C" __global__ void __launch_bounds__({{threads}}) {{name}}({{params}}) {
    constexpr int SQ = {{sq}}, SKV = {{skv}}, D = {{d}}, E = {{e}}, LD = {{ld}};
    constexpr int BM = {{bm}}, BN = {{bn}}, QT = {{qt}}, HQ = {{hq}}, HK = {{hk}};
    constexpr float SCALE = {{scale}};
    constexpr int QI = {{qi}}, KI = {{ki}}, OI = {{oi}};
    const float NEG = __int_as_float(0xff800000);
    __shared__ float qs[BM * LD];
    __shared__ float ks[BN * LD];
    __shared__ float vs[BN * LD];
    __shared__ float ps[BM * (BN + 1)];
    const int tile = blockIdx.x % QT, bh = blockIdx.x / QT;
    const int b = bh / HQ, h = bh % HQ;
    // This block's head of Q and the output (rows QI elements apart) and of K and V (rows
    // KI apart), a KV head serving HQ / HK query heads.
{{bases}}    const int q0 = tile * BM;
    const int r = threadIdx.x >> 2, qd = threadIdx.x & 3;
    const int i = q0 + r;
{{mask_base}}
    for (int c = threadIdx.x; c < BM * LD; c += {{threads}}) {
        const int rr = c / LD, cc = c % LD;
        qs[c] = (q0 + rr < SQ && cc < D) ? gopt_ld(qg[(long long)(q0 + rr) * QI + cc]) : 0.0f;
    }
    float acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = 0.0f;
    float mrun = NEG, lrun = 0.0f;
    const int kv_end = {{kv_end}};
    for (int n0 = 0; n0 < kv_end; n0 += BN) {
        __syncthreads();
        for (int c = threadIdx.x; c < BN * LD; c += {{threads}}) {
            const int rr = c / LD, cc = c % LD;
            const bool in = n0 + rr < SKV && cc < D;
            const long long off = (long long)(n0 + rr) * KI + cc;
            ks[c] = in ? gopt_ld(kg[off]) : 0.0f;
            vs[c] = in ? gopt_ld(vg[off]) : 0.0f;
        }
        __syncthreads();
        // Scores of keys n0 + qd + 4 kk.
        float s[BN / 4];
#pragma unroll
        for (int kk = 0; kk < BN / 4; ++kk) s[kk] = 0.0f;
        for (int d = 0; d < D; ++d) {
            const float x = qs[r * LD + d];
#pragma unroll
            for (int kk = 0; kk < BN / 4; ++kk) s[kk] = fmaf(x, ks[(qd + 4 * kk) * LD + d], s[kk]);
        }
        float mx = mrun;
#pragma unroll
        for (int kk = 0; kk < BN / 4; ++kk) {
            const int j = n0 + qd + 4 * kk;
            const bool ok = i < SQ && j < SKV{{causal_ok}};
            const float x = ok ? s[kk] * SCALE{{bias}} : NEG;
            s[kk] = x;
            mx = fmaxf(mx, x);
        }
        // Row max over the row's four threads; a row masked so far keeps max -inf and
        // exponentiates against 0 (so exp gives 0, never NaN).
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mu = mx == NEG ? 0.0f : mx;
        const float alpha = expf(mrun - mu);
        mrun = mx;
        lrun *= alpha;
#pragma unroll
        for (int kk = 0; kk < BN / 4; ++kk) {
            const float p = expf(s[kk] - mu);
            lrun += p;
            ps[r * (BN + 1) + qd + 4 * kk] = p;
        }
        // The row's probabilities come from its own four threads, all in this warp.
        __syncwarp();
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] *= alpha;
        for (int c = 0; c < BN; ++c) {
            const float p = ps[r * (BN + 1) + c];
#pragma unroll
            for (int e = 0; e < E; ++e) acc[e] = fmaf(p, vs[c * LD + qd + 4 * e], acc[e]);
        }
    }
    // A fully masked row has sum 0 and gives zeros, as the reference.
    lrun += __shfl_xor_sync(0xffffffffu, lrun, 1);
    lrun += __shfl_xor_sync(0xffffffffu, lrun, 2);
    const float inv = lrun > 0.0f ? 1.0f / lrun : 0.0f;
    if (i < SQ) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int c = qd + 4 * e;
            if (c < D) og[(long long)i * OI + c] = {{store}}(acc[e] * inv);
        }
    }
}
