// GridSample ({{mode}}, padding {{padding}}, align_corners {{align}}, {{k}} spatial dims): one
// thread per output element (grid-stride). Each grid component is denormalized in f32
// (rounded by __f*_rn, never contracted) and moved into the image by the padding
// rule; then up to four taps per dim (index, weight) are combined as a tensor
// product, taps that read the zero padding (index -1) dropped.
struct {{name}}_taps {
    int idx[4];
    float w[4];
};

// `v` folded into [lo, hi] at the borders.
static __device__ __forceinline__ float {{name}}_reflect(float v, float lo, float hi) {
    const float rng = hi - lo;
    if (rng <= 0.0f) return lo;
    if (v < lo) {
        const float dx = lo - v;
        const float n = truncf(dx / rng);
        const float r = __fsub_rn(dx, __fmul_rn(n, rng));
        return (n - 2.0f * floorf(n * 0.5f) == 0.0f) ? lo + r : hi - r;
    }
    if (v > hi) {
        const float dx = v - hi;
        const float n = truncf(dx / rng);
        const float r = __fsub_rn(dx, __fmul_rn(n, rng));
        return (n - 2.0f * floorf(n * 0.5f) == 0.0f) ? hi - r : lo + r;
    }
    return v;
}

// Tap index `i` along a dim of `len` samples, by the padding rule (-1: zero).
static __device__ __forceinline__ int {{name}}_pad(int i, int len, float lo, float hi) {
{{pad}}}

// Grid component `v` denormalized along a dim of `len` samples, moved into the
// image by the padding rule.
static __device__ __forceinline__ float {{name}}_coord(float v, float len, float lo, float hi) {
    float c = {{denorm}};
{{fold}}    return c;
}

// The taps at coordinate `c` along a dim of `len` samples (a tap index far outside
// is clamped first: such taps read the padding either way).
static __device__ __forceinline__ {{name}}_taps {{name}}_tap(float c, int len, float lo, float hi) {
    {{name}}_taps r;
{{taps}}    return r;
}

extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, const {{gt}}* __restrict__ grid, {{t}}* __restrict__ out) {
    const long long total = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long o = i % {{points}}LL;
        const long long nc = i / {{points}}LL;
        const long long g = (nc / {{c}}LL * {{points}}LL + o) * {{k}}LL;
        const long long xb = nc * {{plane}}LL;
{{dims}}        float acc = 0.0f;
{{loops}}        out[i] = {{store}};
    }
}
