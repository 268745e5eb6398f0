// {{what}}: one thread per element ({{n}}) in a grid-stride loop, f32 math, one
// rounding at the store.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
{{body}}    }
}
