// {{what}}: channels-last im2col, rows (n, oh, ow) x columns (kh, kw, c) padded to {{kp}}
// with zeros ({{v}} channel(s) per thread), so the convolution is one GEMM against the
// weights reordered to [M, kh, kw, C].
extern "C" __global__ void {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ col) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= {{total}}LL) return;
    const long long row = i / {{kpv}}LL;
    const int kk = (int)(i % {{kpv}}LL) * {{v}};
    {{vec}} out = {{zero}};
    if (kk < {{k}}) {
        const int c = kk % {{c}}, tap = kk / {{c}};
        const int kw = tap % {{kw}}, kh = tap / {{kw}};
        const long long ow = row % {{ow}}, oh = (row / {{ow}}) % {{oh}}, n = row / ({{ow}}LL * {{oh}});
        const long long ih = oh * {{sh}} - {{ph}} + kh * {{dh}}, iw = ow * {{sw}} - {{pw}} + kw * {{dw}};
        if (ih >= 0 && ih < {{h}} && iw >= 0 && iw < {{w}})
            out = *reinterpret_cast<const {{vec}}*>(x + ((n * {{h}} + ih) * {{w}} + iw) * {{c}} + c);
    }
    *reinterpret_cast<{{vec}}*>(col + row * {{kp}}LL + kk) = out;
}
