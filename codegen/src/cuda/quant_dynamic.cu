// DynamicQuantizeLinear of {{n}} elements: one block finds the range (0 included, NaN
// skipped), reduced through shared memory, then quantizes every element to u8;
// thread 0 writes the scale and the zero point.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{xt}}* __restrict__ x, unsigned char* __restrict__ y, {{xt}}* __restrict__ y_scale, unsigned char* __restrict__ y_zero) {
    __shared__ float lo[256];
    __shared__ float hi[256];
    const unsigned int t = threadIdx.x;
    float mn = 0.0f;
    float mx = 0.0f;
    for (long long i = t; i < {{n}}LL; i += 256) {
        const float v = gopt_ld(x[i]);
        if (v == v) {
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
        }
    }
    lo[t] = mn;
    hi[t] = mx;
    __syncthreads();
    for (unsigned int h = 128u; h > 0u; h >>= 1) {
        if (t < h) {
            lo[t] = fminf(lo[t], lo[t + h]);
            hi[t] = fmaxf(hi[t], hi[t + h]);
        }
        __syncthreads();
    }
    const float minx = lo[0];
    const float maxx = hi[0];
    const float scale = (maxx == minx ? 1.0f : maxx - minx) / 255.0f;
    const float zf = 0.0f - minx / scale;
    const float zp = zf != zf ? zf : rintf(fminf(fmaxf(zf, 0.0f), 255.0f));
    for (long long i = t; i < {{n}}LL; i += 256) {
        const float r = rintf(gopt_ld(x[i]) / scale) + zp;
        y[i] = (unsigned char)(r != r ? 0.0f : fminf(fmaxf(r, 0.0f), 255.0f));
    }
    if (t == 0u) {
        y_scale[0] = {{store_scale}};
        y_zero[0] = (unsigned char)(zp != zp ? 0.0f : zp);
    }
}
