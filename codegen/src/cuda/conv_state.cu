// CausalConvWithState ({{k}} taps over {{len}} positions{{silu_note}}): one thread per
// element of y, then of the new state (grid-stride); the padded input is the past
// state's {{km1}} positions followed by the input's.
__device__ __forceinline__ float {{name}}_padded({{xparams}}, long long bc, long long p) {
    if (p < {{km1}}LL) {
        return {{past}};
    }
    return gopt_ld(x[bc * {{len}}LL + p - {{km1}}LL]);
}

extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long ny = {{ny}}LL;
    const long long total = ny + {{ns}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        if (i < ny) {
            const long long t = i % {{len}}LL;
            const long long bc = i / {{len}}LL;
            const long long c = bc % {{channels}}LL;
            float acc = 0.0f;
            for (long long j = 0; j < {{k}}LL; ++j) {
                acc += {{name}}_padded({{xargs}}, bc, t + j) * gopt_ld(w[c * {{k}}LL + j]);
            }
{{bias}}            float v = {{round_acc}};
{{silu}}            y[i] = {{store_v}};
        } else {
{{state}}        }
    }
}
