// {{what}}: channels-last im2col for few channels, rows (n, oh, ow) x columns (kh, kw, c)
// padded to {{kp}} with zeros; each thread gathers 8 consecutive columns and stores them
// as one 16-byte vector.
extern "C" __global__ void {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ col) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= {{total}}LL) return;
    const long long row = i / {{kp8}}LL;
    const int k0 = (int)(i % {{kp8}}LL) * 8;
    const long long ow = row % {{ow}}, oh = (row / {{ow}}) % {{oh}}, n = row / ({{ow}}LL * {{oh}});
    union { uint4 v; {{t}} e[8]; } out;
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int kk = k0 + j;
        {{t}} val = {{zero}};
        if (kk < {{k}}) {
            const int c = kk % {{c}}, tap = kk / {{c}};
            const int kw = tap % {{kw}}, kh = tap / {{kw}};
            const long long ih = oh * {{sh}} - {{ph}} + kh * {{dh}}, iw = ow * {{sw}} - {{pw}} + kw * {{dw}};
            if (ih >= 0 && ih < {{h}} && iw >= 0 && iw < {{w}})
                val = x[((n * {{h}} + ih) * {{w}} + iw) * {{c}} + c];
        }
        out.e[j] = val;
    }
    *reinterpret_cast<uint4*>(col + row * {{kp}}LL + k0) = out.v;
}
