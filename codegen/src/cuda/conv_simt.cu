// {{what}} (implicit GEMM on CUDA cores): {{desc}}. Per group, Y[M/g, N*out] =
// W[M/g, K] x im2col(X)[K, N*out] with K = C/g * taps; a block computes a {{bm}}x{{bn}}
// tile, each thread 4x4 of it in f32 registers; K advances 16 at a time through
// shared memory (W rows and the gathered im2col rows, zeros outside the tensors), the
// next K tile loaded into registers while this one is multiplied.
extern "C" __global__ void __launch_bounds__({{threads}}) {{name}}({{params}}) {
    constexpr int BM = {{bm}}, BN = {{bn}}, BK = 16, TM = 4, TN = 4;
    constexpr int THREADS = {{threads}}, TX = BN / TN, RY = BM / TM;
    constexpr int RA = BM * BK / THREADS, RB = BK * BN / THREADS;
    constexpr long long K = {{k}}LL, MG = {{mg}}LL, NCOL = {{ncol}}LL;
    static_assert(THREADS == TX * RY && THREADS % BN == 0 && RA * THREADS == BM * BK, "tile shape");
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
{{tile}}    float ra[RA], rb[RB];
    auto load = [&](long long k0) {
#pragma unroll
        for (int r = 0; r < RA; ++r) {
            const int e = tid + THREADS * r;
            const long long m = m0 + e / BK, k = k0 + e % BK;
            ra[r] = (m < MG && k < K) ? gopt_ld(w[(g * MG + m) * K + k]) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) {
            const long long k = k0 + tid / BN + (THREADS / BN) * r;
{{gather}}            rb[r] = ok_ ? gopt_ld(x[xi_]) : 0.0f;
        }
    };
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    load(0);
    for (long long k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < RA; ++r) {
            const int e = tid + THREADS * r;
            As[e % BK][e / BK] = ra[r];
        }
#pragma unroll
        for (int r = 0; r < RB; ++r) Bs[tid / BN + (THREADS / BN) * r][bcl] = rb[r];
        __syncthreads();
        if (k0 + BK < K) load(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + RY * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + TX * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long m = m0 + ty + RY * i;
        if (m >= MG) continue;
        const long long oc = g * MG + m;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const long long col = col0 + tx + TX * j;
            if (col >= NCOL) continue;
            const long long n = col / {{p}}LL, p = col % {{p}}LL;
{{epilogue}}        }
    }
}
