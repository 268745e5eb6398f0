// {{what}} ({{mode}}): one thread per lane along the axis (grid-stride) scans it in the
// reference's order, {{how}}.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
{{axis}}    const long long lanes = {{n}}LL / d;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long l = (long long)blockIdx.x * blockDim.x + threadIdx.x; l < lanes; l += stride) {
        const long long base = (l / inner) * d * inner + l % inner;
        {{ct}} acc = {{init}};
        for (long long s = 0; s < d; ++s) {
            const long long at = base + ({{reverse}} ? d - 1 - s : s) * inner;
            const {{ct}} next = acc {{op}} {{load}};
            out[at] = {{store}};
            acc = next;
        }
    }
}
