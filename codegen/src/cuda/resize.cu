// Resize ({{what}}): one thread per output element (grid-stride). Each resampled axis
// maps the element's index to a source coordinate, places its taps around it and
// weighs them; the element is {{how}}.

// The first of the n samples nearest x, ties to the smaller index (the reference's
// window on the edge-padded axis); its floor is clamped to +-2^24 (a coordinate that
// far out is extrapolated or clamped to the axis' end anyway).
__device__ __forceinline__ int {{name}}_first_tap(float x, int n) {
    const int pad = (n + 1) / 2;
    const float xp = x + (float)pad;
    const float p = floorf(xp);
    const float frac = xp - p;
    const int h = n / 2;
    int off;
    if (n % 2 == 0) {
        off = (frac == 0.0f) ? -h : -h + 1;
    } else {
        const int b = -((n - 1) / 2);
        off = (frac <= 0.5f) ? b : b + 1;
    }
    return (int)fminf(fmaxf(p, -16777216.0f), 16777216.0f) + off - pad;
}

// The cubic convolution kernel with coefficient a at distance t.
__device__ __forceinline__ float {{name}}_cubic(float a, float t) {
    const float d = fabsf(t);
    const float d2 = d * d;
    const float d3 = d2 * d;
    if (d <= 1.0f) {
        return (a + 2.0f) * d3 - (a + 3.0f) * d2 + 1.0f;
    }
    if (d < 2.0f) {
        return a * d3 - 5.0f * a * d2 + 8.0f * a * d - 4.0f * a;
    }
    return 0.0f;
}

// The four cubic weights of fractional position r (the reference's expressions).
__device__ __forceinline__ float4 {{name}}_cubic4(float a, float r) {
    const float q = 1.0f - r;
    return make_float4(
        ((a * (r + 1.0f) - 5.0f * a) * (r + 1.0f) + 8.0f * a) * (r + 1.0f) - 4.0f * a,
        ((a + 2.0f) * r - (a + 3.0f)) * r * r + 1.0f,
        ((a + 2.0f) * q - (a + 3.0f)) * q * q + 1.0f,
        ((a * (q + 1.0f) - 5.0f * a) * (q + 1.0f) + 8.0f * a) * (q + 1.0f) - 4.0f * a);
}

// v clamped to the dtype's finite range, NaN kept (the reference saturates so).
__device__ __forceinline__ float {{name}}_sat(float v) {
    return v > {{max}} ? {{max}} : (v < -{{max}} ? -{{max}} : v);
}

extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ out) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
{{decode}}{{axes}}{{body}}    }
}
