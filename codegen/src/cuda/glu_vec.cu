// SwiGLU ({{what}}), vectorized: y = a * sigmoid({{alpha}} * a) * b, each thread reads
// {{vec}} elements of a and of b with 16-byte loads (grid-stride), computed in
// float{{note}}.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ a, const {{t}}* __restrict__ b, {{to}}* __restrict__ out) {
    const long long nv = {{n}}LL / {{vec}};
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += stride) {
        union { uint4 u; {{t}} e[{{vec}}]; } la, lb;
        la.u = reinterpret_cast<const uint4*>(a)[{{ja}}];
        lb.u = reinterpret_cast<const uint4*>(b)[{{jb}}];
        union { {{ov}} u; {{to}} e[{{vec}}]; } o;
#pragma unroll
        for (int k = 0; k < {{vec}}; ++k) {
            const float x = gopt_ld(la.e[k]);
            const float s = {{sig}};
            const float xs = {{xs}};
            o.e[k] = {{store}};
        }
        reinterpret_cast<{{ov}}*>(out)[j] = o.u;
    }
}
