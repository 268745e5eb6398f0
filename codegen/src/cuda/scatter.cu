// {{what}}: one thread per output element (grid-stride loop) copies its data element,
// then applies, in the interpreter's order, the updates that land on it ({{how}}).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        {{t}} v = data[i];
{{body}}        out[i] = v;
    }
}
