// GEMV: y[{{m}}, {{n}}] = {{formula}}, B stored [{{n}}, {{k}}] ({{t}}), on CUDA cores: with
// this few rows the product is bound by reading B once, which this kernel does at bandwidth.
// Each group of {{g}} lanes computes a run of {{c}} output column(s) for all {{m}} rows: per pass,
// each lane loads {{u}} {{w}}-byte word(s) ({{ve}} elements each) of every one of those columns'
// B rows, all in flight together, the group covering {{step}} words of a row (evict-first
// loads: each word is read once); it reads the matching words of A's rows through the
// read-only cache (every warp reads the same A, so it stays in L1) and keeps {{m}} x {{c}} fp32
// sums. The group reduces them with xor shuffles; the epilogue is fp32 and rounds once at
// the store. Groups past column {{n}} re-read the last row (the shuffles need every lane)
// and store nothing.

// The {{ve}} elements of one {{w}}-byte word, as floats.
template <typename W>
static __device__ __forceinline__ void {{name}}_unpack(const W& w, float (&f)[{{ve}}]) {
    const {{t}}* x = reinterpret_cast<const {{t}}*>(&w);
#pragma unroll
    for (int i = 0; i < {{ve}}; ++i) f[i] = gopt_ld(x[i]);
}

// Room for {{min_blocks}} blocks per SM: sized by the block alone, ptxas stops near 64 registers
// and spills, as it issues a pass's loads of A as early as those of B.
extern "C" __global__ void __launch_bounds__({{block}}, {{min_blocks}}) {{name}}({{params}}) {
    typedef {{word_t}} word_t;
    constexpr int M = {{m}}, N = {{n}}, G = {{g}}, C = {{c}}, U = {{u}}, VE = {{ve}};
    // Words per row of A and B, and per pass of a group over a row.
    constexpr int KW = {{kw}}, STEP = G * U;
    constexpr long long K = {{k}}LL;
    // Whole warps past the last column leave together (shuffles stay warp-uniform).
    const int warp_first = (int)((blockIdx.x * {{block}}u + (threadIdx.x & ~31u)) / G);
    if (warp_first * C >= N) return;
    const int gl = threadIdx.x & (G - 1);
    const int n0 = (int)((blockIdx.x * {{block}}u + threadIdx.x) / G) * C;
    const word_t* rows[C];
#pragma unroll
    for (int j = 0; j < C; ++j) {
        rows[j] = reinterpret_cast<const word_t*>(b + (long long)min(n0 + j, N - 1) * K);
    }
    const word_t* aw = reinterpret_cast<const word_t*>(a);
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
#pragma unroll
        for (int s = 0; s < U; ++s) {
            const int c = c0 + s * G + gl;
#pragma unroll
            for (int j = 0; j < C; ++j) {
                wb[s][j] = word_t{};
                if (KW % STEP == 0 || c < KW) wb[s][j] = __ldcs(rows[j] + c);
            }
        }
#pragma unroll
        for (int s = 0; s < U; ++s) {
            const int c = c0 + s * G + gl;
            if (KW % STEP == 0 || c < KW) {
                float fb[C][VE];
#pragma unroll
                for (int j = 0; j < C; ++j) {{name}}_unpack(wb[s][j], fb[j]);
#pragma unroll
                for (int i = 0; i < M; ++i) {
                    float fa[VE];
                    {{name}}_unpack(__ldg(aw + i * KW + c), fa);
#pragma unroll
                    for (int j = 0; j < C; ++j) {
#pragma unroll
                        for (int e = 0; e < VE; ++e) acc[j][i] = fmaf(fa[e], fb[j][e], acc[j][i]);
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
            float s = acc[j][i];
#pragma unroll
            for (int o = G / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            const int n = n0 + j;
            if (gl == (i * C + j) % G && n < N) {
                float v = {{scaled}};
{{bias}}                v = {{act}};
{{residual}}                y[(long long)i * N + n] = {{store}};
            }
        }
    }
}
