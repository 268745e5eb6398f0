// {{what}} along an axis of {{d}} elements ({{inner}} apart): one thread per lane
// (grid-stride) walks it in order; NaN is larger than every number and the first one
// wins (the reference's numpy order), ties go to the {{tie}} index.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, {{ot}}* __restrict__ out) {
    const long long lanes = {{lanes}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < lanes; o += stride) {
        const long long base = (o / {{inner}}LL) * {{span}}LL + o % {{inner}}LL;
        {{ct}} best = {{first}};
        bool bnan = {{bnan}};
        long long bi = 0;
        for (long long j = 1; j < {{d}}LL; ++j) {
            const {{ct}} v = {{load}};
            const bool vnan = {{vnan}};
            const bool take = bnan ? ({{last}} && vnan)
                                   : (vnan || {{better}} || ({{last}} && v == best));
            if (take) {
                best = v;
                bnan = vnan;
                bi = j;
            }
        }
{{write}}    }
}
