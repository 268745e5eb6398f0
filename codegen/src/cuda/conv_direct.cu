// {{what}} (direct, one input channel per group): {{desc}}. One thread per output
// element (grid-stride), the taps unrolled, f32 accumulation (multiply, then add, in
// tap order: the reference interpreter's exact arithmetic), fused epilogue.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        {{decode}}        const long long ic = oc / {{mult}}LL;
        const long long p = oh * {{ow}}LL + ow;
        const auto* __restrict__ xp = x + ({{xplane}});
        const auto* __restrict__ wp = w + oc * {{taps}}LL;
        float acc = 0.0f;
#pragma unroll
        for (int kh = 0; kh < {{kh}}; ++kh) {
            const int ih = (int)oh * {{sh}} - {{ph}} + kh * {{dh}};
            if (ih < 0 || ih >= {{h}}) continue;
#pragma unroll
            for (int kw = 0; kw < {{kw}}; ++kw) {
                const int iw = (int)ow * {{sw}} - {{pw}} + kw * {{dw}};
                if (iw < 0 || iw >= {{w}}) continue;
                acc = __fadd_rn(acc, __fmul_rn(gopt_ld(xp[{{xoff}}]), gopt_ld(wp[kh * {{kw}} + kw])));
            }
        }
{{epilogue}}    }
}
