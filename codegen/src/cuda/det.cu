// Det of {{batch}} {{m}} x {{m}} matrices: one thread per matrix (grid-stride) copies it
// into local memory and eliminates with partial pivoting in {{ct}} (the last of equally
// large pivots, NaN largest; a zero pivot gives 0), the determinant the product of the
// pivots, negated per row swap.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ out) {
    const long long batch = {{batch}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    {{ct}} a[{{mm}}];
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += stride) {
        for (int k = 0; k < {{m}} * {{m}}; ++k) a[k] = gopt_ld(x[b * {{m}} * {{m}} + k]);
        {{ct}} d = 1;
        for (int col = 0; col < {{m}}; ++col) {
            int p = col;
            {{ct}} best = {{abs}}(a[col * {{m}} + col]);
            for (int r = col + 1; r < {{m}}; ++r) {
                const {{ct}} v = {{abs}}(a[r * {{m}} + col]);
                if (isnan(v) || v >= best) {
                    best = v;
                    p = r;
                }
            }
            if (a[p * {{m}} + col] == 0) {
                d = 0;
                break;
            }
            if (p != col) {
                for (int k = 0; k < {{m}}; ++k) {
                    const {{ct}} t = a[p * {{m}} + k];
                    a[p * {{m}} + k] = a[col * {{m}} + k];
                    a[col * {{m}} + k] = t;
                }
                d = -d;
            }
            const {{ct}} piv = a[col * {{m}} + col];
            d = d * piv;
            for (int r = col + 1; r < {{m}}; ++r) {
                const {{ct}} f = a[r * {{m}} + col] / piv;
                if (f != 0) {
                    for (int k = col; k < {{m}}; ++k) a[r * {{m}} + k] = a[r * {{m}} + k] - f * a[col * {{m}} + k];
                }
            }
        }
        out[b] = {{store}};
    }
}
