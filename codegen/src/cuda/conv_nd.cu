// {{what}} (direct 3-D convolution): {{desc}}.
// One thread per output element (grid-stride), decoded in Y's layout: its group's
// {{cg}} input channels x {{kd}}x{{kh}}x{{kw}} taps summed in f32 (taps outer, so one bounds
// check per tap covers every channel), then the fused epilogue and one rounding at
// the store.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
{{decode}}        const long long g = oc / {{mg}}LL;
        const long long xb = {{xbase}};
        const long long wb = oc * {{wrow}}LL;
        float acc_ = 0.0f;
        for (int kd = 0; kd < {{kd}}; ++kd) {
            const int xd = (int)od * {{sd}} + kd * {{dd}} - {{pd}};
            if (xd < 0 || xd >= {{d}}) continue;
            for (int kh = 0; kh < {{kh}}; ++kh) {
                const int xh = (int)oh * {{sh}} + kh * {{dh}} - {{ph}};
                if (xh < 0 || xh >= {{h}}) continue;
                for (int kw = 0; kw < {{kw}}; ++kw) {
                    const int xw = (int)ow * {{sw}} + kw * {{dw}} - {{pw}};
                    if (xw < 0 || xw >= {{w}}) continue;
                    const long long xo = xb + {{xoff}};
                    const long long wo = wb + (kd * {{kh}} + kh) * {{kw}} + kw;
                    for (int ci = 0; ci < {{cg}}; ++ci) {
                        acc_ = acc_ + gopt_ld(x[xo + ci * {{xcs}}LL]) * gopt_ld(w[wo + ci * {{taps}}LL]);
                    }
                }
            }
        }
{{epilogue}}    }
}
