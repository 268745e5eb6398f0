// {{what}}: a direct {{spatial}}-D convolution ({{m}} output channels, {{group}} groups,
// {{cg}} input channels x {{taps}} taps per output), one thread per output element
// (grid-stride); the zero points subtracted (padding reads nothing), the products
// summed in 32 bits (wrapping){{how}}.
{{requant}}extern "C" __global__ void __launch_bounds__(256) {{name}}({{sig}}) {
    const long long count = {{count}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        long long r = i;
{{coords}}        const long long oc = r % {{m}}LL;
        const long long nb = r / {{m}}LL;
        const long long xb = (nb * {{c}}LL + (oc / {{mg}}LL) * {{cg}}LL) * {{in_size}}LL;
        const long long wb = oc * {{cg}}LL * {{taps}}LL;
        const int zx = {{zx}};
        const int zw = {{zw}};
        unsigned int acc = {{acc0}};
        for (long long ci = 0; ci < {{cg}}LL; ++ci) {
            for (long long t = 0; t < {{taps}}LL; ++t) {
                long long tr = t;
                bool ok = true;
                long long at = 0;
{{taps_code}}                if (ok) {
                    acc += (unsigned int)((int)x[xb + ci * {{in_size}}LL + at] - zx) * (unsigned int)((int)w[wb + ci * {{taps}}LL + t] - zw);
                }
            }
        }
{{store}}    }
}
