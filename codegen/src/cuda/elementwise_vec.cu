// Element-wise kernel, vectorized: every tensor operand has the output's shape and
// storage type, so each thread moves 16 bytes ({{vec}} elements) per load and store;
// scalars are read once. Math in fp32 (fp64 for f64), one rounding at the store.
extern "C" __global__ void {{name}}({{params}}) {
    const long long nv = {{n}}LL / {{vec}};
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += stride) {
{{vec_loads}}        union { uint4 u; {{out_t}} e[{{vec}}]; } o;
#pragma unroll
        for (int k = 0; k < {{vec}}; ++k) {
{{body}}            o.e[k] = {{store}};
        }
        reinterpret_cast<uint4*>(out)[j] = o.u;
    }
}
