// {{what}} (implicit GEMM on tensor cores, mma.sync m16n8k16, {{t}} in, f32
// accumulation): {{desc}}. Per group, Y[M/g, N*out] = W[M/g, K] x im2col(X)[K, N*out]
// with K = C/g * taps; a block of {{threads}} threads computes a {{bm}}x{{bn}} tile, each
// warp {{wm}}x{{wn}} of it in registers; K advances 32 at a time through shared memory
// (W rows, 16 bytes at a time when K allows, and the gathered im2col rows, zeros
// outside the tensors; rows padded by 8 elements so ldmatrix is conflict-free), the next
// K tile loaded into registers while this one is multiplied. A K tile's (channel,
// kernel row, kernel column) offsets are computed once per tile into a small shared
// table, so the gather is an add and a bounds check. The epilogue runs on the
// accumulator registers.
extern "C" __global__ void __launch_bounds__({{threads}}) {{name}}({{params}}) {
    constexpr int BM = {{bm}}, BN = {{bn}}, BK = 32;
    constexpr int THREADS = {{threads}}, WARPS_N = {{warps_n}}, WM = {{wm}}, WN = {{wn}};
    constexpr int FM = WM / 16, FN = WN / 8;
    constexpr int LDA = BK + 8, LDB = BN + 8;
    constexpr int RA = BM * BK / THREADS, RB = BK * BN / THREADS;
    constexpr long long K = {{k}}LL, MG = {{mg}}LL, NCOL = {{ncol}}LL;
    static_assert((BM / WM) * (BN / WN) * 32 == THREADS && BN / WN == WARPS_N, "warp layout");
    static_assert(THREADS % BN == 0 && RA * THREADS == BM * BK && FN % 2 == 0, "tile shape");
    static_assert(RA % 8 == 0 && THREADS >= BK, "vector and table loads");
    __shared__ __align__(16) unsigned short As[BM * LDA];
    __shared__ __align__(16) unsigned short Bs[BK * LDB];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    // W rows move 8 elements (16 bytes) at a time when K is a multiple of 8.
    constexpr bool AVEC = {{avec}};
    __shared__ __align__(16) int4 ktab[2][BK];
{{tile}}{{base}}    unsigned short ra[RA], rb[RB];
    uint4 va[RA / 8];
    // Table of K tile k0: per row, (offset in X, kernel row shift, column shift).
    auto fill_table = [&](long long k0, int buf) {
{{table}}        (void)k0; (void)buf;
    };
    auto load = [&](long long k0, int buf) {
        if constexpr (AVEC) {
#pragma unroll
            for (int r = 0; r < RA / 8; ++r) {
                const int v = tid + THREADS * r;
                const long long m = m0 + v / (BK / 8), k = k0 + (v % (BK / 8)) * 8;
                va[r] = (m < MG && k < K) ? *reinterpret_cast<const uint4*>(w + (g * MG + m) * K + k)
                                          : make_uint4(0u, 0u, 0u, 0u);
            }
        } else {
#pragma unroll
            for (int r = 0; r < RA; ++r) {
                const int e = tid + THREADS * r;
                const long long m = m0 + e / BK, k = k0 + e % BK;
                ra[r] = (m < MG && k < K) ? {{bits}}(w[(g * MG + m) * K + k]) : (unsigned short)0;
            }
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const int kr = tid / BN + (THREADS / BN) * r;
            const long long k = k0 + kr;
{{gather}}            rb[r] = ok_ ? {{bits}}(x[xi_]) : (unsigned short)0;
            (void)k; (void)buf;
        }
    };
    float acc[FM][FN][4];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    const unsigned as_ = gopt_smem_addr(As), bs_ = gopt_smem_addr(Bs);
    fill_table(0, 0);
    __syncthreads();
    load(0, 0);
    int buf = 0;
    for (long long k0 = 0; k0 < K; k0 += BK, buf ^= 1) {
        if constexpr (AVEC) {
#pragma unroll
            for (int r = 0; r < RA / 8; ++r) {
                const int v = tid + THREADS * r;
                *reinterpret_cast<uint4*>(As + (v / (BK / 8)) * LDA + (v % (BK / 8)) * 8) = va[r];
            }
        } else {
#pragma unroll
            for (int r = 0; r < RA; ++r) {
                const int e = tid + THREADS * r;
                As[(e / BK) * LDA + e % BK] = ra[r];
            }
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) Bs[(tid / BN + (THREADS / BN) * r) * LDB + bcl] = rb[r];
        // The next tile's table goes to the other buffer (its last reader was the load
        // before the previous barrier).
        fill_table(k0 + BK, buf ^ 1);
        __syncthreads();
        if (k0 + BK < K) load(k0 + BK, buf ^ 1);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                // Lanes 0-15 give rows 0-15 at k, lanes 16-31 the same rows at k + 8.
                const int row = wm0 + 16 * i + (lane & 15), col = kk + (lane >> 4) * 8;
                gopt_ldsm_x4(a[i], as_ + (unsigned)(row * LDA + col) * 2u);
            }
#pragma unroll
            for (int j = 0; j < FN; j += 2) {
                // Matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
                const int q = lane >> 3;
                const int row = kk + (q & 1) * 8 + (lane & 7), col = wn0 + 8 * j + (q >> 1) * 8;
                unsigned t4[4];
                gopt_ldsm_x4_trans(t4, bs_ + (unsigned)(row * LDB + col) * 2u);
                b[j][0] = t4[0]; b[j][1] = t4[1]; b[j + 1][0] = t4[2]; b[j + 1][1] = t4[3];
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) {{mma}}(acc[i][j], a[i], b[j]);
        }
        __syncthreads();
    }
    // Accumulator layout: element e of tile (i, j) is row gid + 8 (e / 2), column
    // 2 tig + e % 2 (gid = lane / 4, tig = lane % 4).
    const int gid = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const long long m = m0 + wm0 + 16 * i + gid + 8 * (e >> 1);
                const long long col = col0 + wn0 + 8 * j + 2 * tig + (e & 1);
                if (m < MG && col < NCOL) {
                    const long long oc = g * MG + m, n = col / {{p}}LL, p = col % {{p}}LL;
{{epilogue}}                }
            }
}
