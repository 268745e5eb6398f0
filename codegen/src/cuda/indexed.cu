// {{what}}: one thread per output element (grid-stride loop), {{how}}.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
{{pre}}    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
{{body}}    }
}
