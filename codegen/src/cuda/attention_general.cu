// {{what}} ({{dtype}} data, fp32 math), the general kernel: one block of WG threads per
// (query row, query head, batch) scores every key (the KV cache's, then the new ones) in three
// passes over the keys (max, sum, weighted sum of V), following the interpreter step by step,
// its roundings to the data's type (`rnd`) and the softmax's (`smr`) included:
// raw = (q·√s)·(k·√s), capped = softcap(raw), x = capped + bias (mask, causal, window and
// padding as -inf), p = exp(x - max) / sum over the keys whose bias is not -inf; a row whose
// keys are all masked gives zeros. A bf16 softmax sums one key at a time, rounding each
// partial sum (SM_SEQ), as the reference does. The blocks also copy the cache and the new keys and
// values into present_key/present_value (grid-stride) and write qk_matmul_output. The same
// algorithm as the WGSL general shader, line by line.
extern "C" __global__ void __launch_bounds__(64) {{name}}({{params}}) {
    constexpr long long WG = 64;
    constexpr long long BATCH = {{batch}}, SQ = {{sq}}, HQ = {{hq}}, HK = {{hk}}, GROUP = {{group}};
    constexpr long long DK = {{dk}}, DV = {{dv}}, PAST = {{past}}, TOTAL = {{total}};
    constexpr long long Q_OFF = {{q_off}}, Q_SB = {{q_sb}}, Q_SH = {{q_sh}}, Q_SI = {{q_si}};
    constexpr long long K_OFF = {{k_off}}, K_SB = {{k_sb}}, K_SH = {{k_sh}}, K_SI = {{k_si}};
    constexpr long long V_OFF = {{v_off}}, V_SB = {{v_sb}}, V_SH = {{v_sh}}, V_SI = {{v_si}};
    constexpr long long O_SB = {{o_sb}}, O_SH = {{o_sh}}, O_SI = {{o_si}};
    constexpr int E = {{e}};
    constexpr long long NBLK = {{nblk}};
    constexpr float SQS = {{sqs}}, CAP = {{cap}};
    constexpr long long LEFT = {{left}}, RIGHT = {{right}};
    constexpr bool CAUSAL = {{causal}};
    constexpr bool SM_SEQ = {{sm_seq}};
    constexpr long long LIM = 1073741824LL;
    const float NEG = -3.4028235e38f;
    const float NEG_INF = __int_as_float(0xff800000);
    __shared__ float red[WG];
    __shared__ float pw[WG];
    const long long t = threadIdx.x;
    const long long i = blockIdx.x % SQ;
    const long long h = (blockIdx.x / SQ) % HQ;
    const long long b = blockIdx.x / (SQ * HQ);
    const long long kh = h / GROUP;
    const long long qb = Q_OFF + b * Q_SB + h * Q_SH + i * Q_SI;
    // Keys at or past `n` are padding (nonpad_kv_seqlen, clamped to +-2^30); query row 0 sits
    // at position `off` among the keys.
{{kv_len}}{{offset}}    const long long flat = ((b * HQ + h) * SQ + i) * WG + t;
    (void)flat;
    (void)LIM;
    // Round to the data's type and to the softmax precision's.
    auto rnd = [&](float x) -> float { return {{rnd}}; };
    auto smr = [&](float x) -> float { return {{smr}}; };
    auto kraw = [&](long long bb, long long hh, long long j, long long c) -> {{t}} {
{{past_k}}        return k[K_OFF + bb * K_SB + hh * K_SH + (j - PAST) * K_SI + c];
    };
    auto vraw = [&](long long bb, long long hh, long long j, long long c) -> {{t}} {
{{past_v}}        return v[V_OFF + bb * V_SB + hh * V_SH + (j - PAST) * V_SI + c];
    };
    auto mask_at = [&](long long j) -> float {
{{mask_at}}    };
    auto bias = [&](long long j) -> float {
        float x = mask_at(j);
        const long long pos = off + i;
        if (CAUSAL && j > pos) { x = NEG_INF; }
        if (LEFT >= 0 && pos - j > LEFT) { x = NEG_INF; }
        if (RIGHT >= 0 && j - pos > RIGHT) { x = NEG_INF; }
        if (j >= n) { x = NEG_INF; }
        return x;
    };
    auto raw_score = [&](long long j) -> float {
        const float sqs = rnd(SQS);
        float s = 0.0f;
        for (long long c = 0; c < DK; c++) {
            s = s + rnd(gopt_ld(q[qb + c]) * sqs) * rnd(gopt_ld(kraw(b, kh, j, c)) * sqs);
        }
        return rnd(s);
    };
    auto capped = [&](float r) -> float {
        if (CAP > 0.0f) { return rnd(rnd(tanhf(fminf(fmaxf(rnd(r / CAP), -20.0f), 20.0f))) * CAP); }
        return r;
    };
{{present}}
    // Pass 1: the max over the keys not masked.
    float m = NEG_INF;
    for (long long j = t; j < TOTAL; j += WG) {
        const float bj = bias(j);
        if (bj >= NEG) { m = fmaxf(m, smr(rnd(capped(raw_score(j)) + bj))); }
    }
    red[t] = m;
    __syncthreads();
    for (long long s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { red[t] = fmaxf(red[t], red[t + s]); }
        __syncthreads();
    }
    const float mx = red[0];
    __syncthreads();
    const bool live = mx >= NEG;

    // Pass 2: the sum of exp(x - max) (one thread, key by key, when SM_SEQ).
    float l = 0.0f;
    if (!SM_SEQ || t == 0) {
        for (long long j = SM_SEQ ? 0 : t; j < TOTAL; j += SM_SEQ ? 1 : WG) {
            const float bj = bias(j);
            if (bj >= NEG) {
                const float x = smr(rnd(capped(raw_score(j)) + bj));
                const float ex = smr(expf(smr(x - mx)));
                l = SM_SEQ ? smr(l + ex) : l + ex;
            }
        }
    }
    red[t] = l;
    __syncthreads();
    for (long long s = WG / 2; s > 0; s >>= 1) {
        if (t < s) { red[t] = red[t] + red[t + s]; }
        __syncthreads();
    }
    float sum = smr(red[0]);
    if (sum == 0.0f) { sum = 1.0f; }

    // Pass 3: WG keys at a time, their probabilities through `pw`, times V.
    float acc[E];
    for (int e = 0; e < E; e++) { acc[e] = 0.0f; }
    for (long long c0 = 0; c0 < TOTAL; c0 += WG) {
        const long long j = c0 + t;
        float p = 0.0f;
        if (j < TOTAL) {
            const float raw = raw_score(j);
            const float cp = capped(raw);
            const float bj = bias(j);
            const float x = rnd(cp + bj);
            if (live && bj >= NEG) { p = rnd(smr(smr(expf(smr(smr(x) - mx))) / sum)); }
            (void)x;
{{qk_store}}        }
        pw[t] = p;
        __syncthreads();
        const long long cnt = WG < TOTAL - c0 ? WG : TOTAL - c0;
        for (int e = 0; e < E; e++) {
            const long long col = t + e * WG;
            if (col < DV) {
                float s = acc[e];
                for (long long u = 0; u < cnt; u++) {
                    s = s + pw[u] * gopt_ld(vraw(b, kh, c0 + u, col));
                }
                acc[e] = s;
            }
        }
        __syncthreads();
    }
    const long long ob = b * O_SB + h * O_SH + i * O_SI;
    for (int e = 0; e < E; e++) {
        const long long col = t + e * WG;
        if (col < DV) { y[ob + col] = {{store}}; }
    }
}
