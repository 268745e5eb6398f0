// {{what}}: [{{m}} x {{k}}] x [{{k}} x {{n}}] products over {{count}} outputs, one
// thread per output (grid-stride); the zero points subtracted, the products summed in
// 32 bits (wrapping){{how}}.
{{requant}}extern "C" __global__ void __launch_bounds__(256) {{name}}({{sig}}) {
    const long long count = {{count}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const long long col = i % {{n}}LL;
        const long long row = (i / {{n}}LL) % {{m}}LL;
        long long r = i / {{mn}}LL;
        long long ao = row * {{k}}LL;
        long long bo = col;
{{batch}}        (void)r;
        const int za = {{za}};
        const int zb = {{zb}};
        unsigned int acc = 0u;
        for (long long kk = 0; kk < {{k}}LL; ++kk) {
            acc += (unsigned int)((int)a[ao + kk] - za) * (unsigned int)((int)b[bo + kk * {{n}}LL] - zb);
        }
{{store}}    }
}
