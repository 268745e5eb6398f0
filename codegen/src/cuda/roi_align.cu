// RoiAlign (mode {{mode}}, {{ctm}}, sampling_ratio {{ratio}}, spatial_scale {{scale}}):
// one thread per output element (region, channel, bin row, bin column; grid-stride),
// sampling its bin bilinearly on a grid of samples. The region's batch index is read
// on the device: one outside the batch raises the node's code in gopt_err and reads
// batch 0. Products and sums are rounded separately (__f*_rn), as on WGSL.

// The four weighted corners of the bilinear sample at (y0, x0) of the plane at
// `base`: all zero more than a pixel outside the plane.
static __device__ __forceinline__ float4 {{name}}_corners(const {{t}}* __restrict__ x, long long base, float y0, float x0) {
    if (y0 < -1.0f || y0 > {{h}}.0f || x0 < -1.0f || x0 > {{w}}.0f) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float y = fmaxf(y0, 0.0f);
    float xx = fmaxf(x0, 0.0f);
    unsigned int yl = (unsigned int)y;
    unsigned int xl = (unsigned int)xx;
    unsigned int yh = yl + 1u;
    unsigned int xh = xl + 1u;
    if (yl >= {{h}}u - 1u) {
        yl = {{h}}u - 1u;
        yh = yl;
        y = (float)yl;
    }
    if (xl >= {{w}}u - 1u) {
        xl = {{w}}u - 1u;
        xh = xl;
        xx = (float)xl;
    }
    const float ly = y - (float)yl;
    const float lx = xx - (float)xl;
    const float hy = 1.0f - ly;
    const float hx = 1.0f - lx;
    return make_float4(
        __fmul_rn(__fmul_rn(hy, hx), gopt_ld(x[base + yl * {{w}}LL + xl])),
        __fmul_rn(__fmul_rn(hy, lx), gopt_ld(x[base + yl * {{w}}LL + xh])),
        __fmul_rn(__fmul_rn(ly, hx), gopt_ld(x[base + yh * {{w}}LL + xl])),
        __fmul_rn(__fmul_rn(ly, lx), gopt_ld(x[base + yh * {{w}}LL + xh])));
}

extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, const {{rt}}* __restrict__ rois, const {{bt}}* __restrict__ bidx, {{t}}* __restrict__ out, unsigned int* __restrict__ gopt_err) {
    const long long total = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long px = i % {{pw}}LL;
        const long long py = (i / {{pw}}LL) % {{ph}}LL;
        const long long rc = i / {{bins}}LL;
        const long long ch = rc % {{c}}LL;
        const long long ri = rc / {{c}}LL;
        long long b = (long long)bidx[ri];
        if (b < 0 || b >= {{nb}}LL) {
            atomicMax(gopt_err, {{code}}u);
            b = 0;
        }
        const long long rb = ri * 4;
        const float sw = __fsub_rn(__fmul_rn(gopt_ld(rois[rb]), {{scalef}}), {{off}});
        const float sh = __fsub_rn(__fmul_rn(gopt_ld(rois[rb + 1]), {{scalef}}), {{off}});
        float rw = __fsub_rn(__fsub_rn(__fmul_rn(gopt_ld(rois[rb + 2]), {{scalef}}), {{off}}), sw);
        float rh = __fsub_rn(__fsub_rn(__fmul_rn(gopt_ld(rois[rb + 3]), {{scalef}}), {{off}}), sh);
{{least}}        const float bh = rh / {{ph}}.0f;
        const float bw = rw / {{pw}}.0f;
{{grid}}        const long long base = (b * {{c}}LL + ch) * {{plane}}LL;
        float acc = {{init}};
        for (unsigned int iy = 0; iy < gh; ++iy) {
            const float yy = __fadd_rn(__fadd_rn(sh, __fmul_rn((float)py, bh)), __fmul_rn((float)iy + 0.5f, bh) / (float)gh);
            for (unsigned int ix = 0; ix < gw; ++ix) {
                const float xx = __fadd_rn(__fadd_rn(sw, __fmul_rn((float)px, bw)), __fmul_rn((float)ix + 0.5f, bw) / (float)gw);
                const float4 v = {{name}}_corners(x, base, yy, xx);
{{each}}            }
        }
{{finish}}        out[i] = {{store}};
    }
}
