// {{what}}: the part of a GEMM node's epilogue cuBLASLt cannot do, in place on the
// GEMM's output: y = {{formula}}.
extern "C" __global__ void {{name}}({{params}}) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= {{n}}LL) return;
{{coords}}    float v = gopt_ld(y[i]);
{{body}}    y[i] = ({{t}})(v);
}
