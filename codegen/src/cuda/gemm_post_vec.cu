// {{what}}: the part of a GEMM node's epilogue cuBLASLt cannot do, in place on the
// GEMM's output, {{vec}} elements per thread with 16-byte accesses: y = {{formula}}.
extern "C" __global__ void {{name}}({{params}}) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= {{n}}LL / {{vec}}LL) return;
    union { uint4 u; {{t}} e[{{vec}}]; } p;
    p.u = reinterpret_cast<const uint4*>(y)[j];
#pragma unroll
    for (int e = 0; e < {{vec}}; ++e) {
        float v = gopt_ld(p.e[e]);
{{body}}        p.e[e] = ({{t}})(v);
    }
    reinterpret_cast<uint4*>(y)[j] = p.u;
}
