// AffineGrid ({{k}} spatial dims {{sizes}}, align_corners {{align}}): one thread per output
// component (grid-stride): row r of theta[b] times the homogeneous base-grid point
// (x, y, (z), 1). Each base coordinate is an exact integer ratio rounded once; the
// products are fused into the sum.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ theta, {{t}}* __restrict__ out) {
    const long long total = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long r = i % {{k}}LL;
        long long p = i / {{k}}LL;
{{coords}}        const long long tb = p * {{mat}}LL + r * {{row}}LL;
        float acc = gopt_ld(theta[tb + {{k}}LL]);
{{dot}}        out[i] = {{store}};
    }
}
