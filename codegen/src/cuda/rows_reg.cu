// Row kernel ({{what}}), register-cached: one block of {{block}} threads per row of {{d}}
// elements; each thread loads its {{per}} elements once with 16-byte accesses
// ({{vec}} per access), keeps them in registers for the statistics (fp32, block-wide
// reductions), and stores the result ({{ot}}, {{vec}} per access): one read and one
// write of the row.
extern "C" __global__ void {{name}}({{params}}) {
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const {{t}}* __restrict__ xr = x + row * {{d}}LL;
    {{ot}}* __restrict__ yr = out + row * {{d}}LL;
    float v[{{per}}];
    bool ok[{{per}} / {{vec}}];
#pragma unroll
    for (int k = 0; k < {{per}} / {{vec}}; ++k) {
        const int c0 = (k * {{block}} + threadIdx.x) * {{vec}};
        ok[k] = c0 < {{d}};
        union { uint4 u; {{t}} e[{{vec}}]; } l;
        if (ok[k]) l.u = reinterpret_cast<const uint4*>(xr)[c0 / {{vec}}];
#pragma unroll
        for (int e = 0; e < {{vec}}; ++e) v[k * {{vec}} + e] = ok[k] ? gopt_ld(l.e[e]) : 0.0f;
    }
{{body}}
#pragma unroll
    for (int k = 0; k < {{per}} / {{vec}}; ++k) {
        if (!ok[k]) continue;
        const int c0 = (k * {{block}} + threadIdx.x) * {{vec}};
        union { {{ovec}} u; {{ot}} e[{{vec}}]; } s;
{{pre}}#pragma unroll
        for (int e = 0; e < {{vec}}; ++e) {
            const int c = c0 + e;
            s.e[e] = {{store}};
        }
        reinterpret_cast<{{ovec}}*>(yr)[c0 / {{vec}}] = s.u;
{{store2}}    }
}
