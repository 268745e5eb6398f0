// {{what}} of {{n}} elements: one thread per element (grid-stride), each element's
// scale and zero point found by the parameter map ({{params}}).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{sig}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float s = gopt_ld(scale[{{sidx}}]);
        const float z = {{zero}};
{{body}}    }
}
