// DeformConv (2-D): one thread per output element (grid-stride) sums, over its group's
// input channels and the kernel taps, the weight times the input sampled bilinearly at
// the tap's position plus its offset (corners outside the {{h}} x {{w}} image read
// zero), times the mask when there is one; f32, one rounding at the store.
__device__ __forceinline__ float {{name}}_pixel(const {{t}}* __restrict__ x, long long xb, long long r, long long c) {
    if (r >= 0 && c >= 0 && r < {{h}}LL && c < {{w}}LL) {
        return gopt_ld(x[xb + r * {{w}}LL + c]);
    }
    return 0.0f;
}

__device__ __forceinline__ float {{name}}_sample(const {{t}}* __restrict__ x, long long xb, float y, float xx) {
    if (y <= -1.0f || y >= {{h}}.0f || xx <= -1.0f || xx >= {{w}}.0f) {
        return 0.0f;
    }
    const float y0 = floorf(y);
    const float x0 = floorf(xx);
    const float ly = y - y0;
    const float lx = xx - x0;
    const long long yi = (long long)y0;
    const long long xi = (long long)x0;
    return {{name}}_pixel(x, xb, yi, xi) * (1.0f - ly) * (1.0f - lx)
        + {{name}}_pixel(x, xb, yi, xi + 1) * (1.0f - ly) * lx
        + {{name}}_pixel(x, xb, yi + 1, xi) * ly * (1.0f - lx)
        + {{name}}_pixel(x, xb, yi + 1, xi + 1) * ly * lx;
}

extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        long long r = i;
        const long long ox = r % {{ow}}LL; r /= {{ow}}LL;
        const long long oy = r % {{oh}}LL; r /= {{oh}}LL;
        const long long m = r % {{m}}LL;
        const long long n = r / {{m}}LL;
        const long long grp = m / {{mg}}LL;
        const long long q = oy * {{ow}}LL + ox;
        float acc = 0.0f;
        for (long long cc = 0; cc < {{cg}}LL; ++cc) {
            const long long ch = grp * {{cg}}LL + cc;
            const long long xb = (n * {{c}}LL + ch) * {{h}}LL * {{w}}LL;
            const long long ob = (n * {{og}}LL + ch / {{cog}}LL) * {{taps}}LL;
            for (long long ki = 0; ki < {{kh}}LL; ++ki) {
                for (long long kj = 0; kj < {{kw}}LL; ++kj) {
                    const long long tap = ki * {{kw}}LL + kj;
                    const float dy = gopt_ld(off[((ob + tap) * 2) * {{p}}LL + q]);
                    const float dx = gopt_ld(off[((ob + tap) * 2 + 1) * {{p}}LL + q]);
                    const float y = (float)(oy * {{sh}}LL + ki * {{dh}}LL - {{ph}}LL) + dy;
                    const float xx = (float)(ox * {{sw}}LL + kj * {{dw}}LL - {{pw}}LL) + dx;
                    float v = {{name}}_sample(x, xb, y, xx);
{{mask}}                    acc += gopt_ld(w[((m * {{cg}}LL + cc) * {{kh}}LL + ki) * {{kw}}LL + kj]) * v;
                }
            }
        }
        out[i] = {{store}};
    }
}
