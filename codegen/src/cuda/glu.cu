// SwiGLU ({{what}}): y = a * sigmoid({{alpha}} * a) * b, one thread per element
// (grid-stride), computed in float{{note}}.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ a, const {{t}}* __restrict__ b, {{to}}* __restrict__ out) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float x = gopt_ld(a[{{ia}}]);
        const float s = {{sig}};
        const float xs = {{xs}};
        out[i] = {{store}};
    }
}
