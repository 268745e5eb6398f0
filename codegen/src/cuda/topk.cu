// TopK ({{what}} {{k}} of {{d}} elements {{inner}} apart along the axis): one thread per
// data element (grid-stride) counts the elements of its lane that come before it (NaN
// above every number, equal values by the lower index), stopping at k, and, ranked
// below k, stores itself and its index at its rank.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ values, long long* __restrict__ indices) {
    auto before = []({{ct}} a, {{ct}} b) { return {{before}}; };
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long p = (i / {{inner}}LL) % {{d}}LL;
        const long long base = i - p * {{inner}}LL;
        const {{ct}} v = {{load_v}};
        long long rank = 0;
        for (long long j = 0; j < {{d}}LL; ++j) {
            const {{ct}} w = {{load_w}};
            if (before(w, v) || (j < p && !before(v, w))) {
                ++rank;
                if (rank >= {{k}}LL) break;
            }
        }
        if (rank < {{k}}LL) {
            const long long at = ((i / {{span}}LL) * {{k}}LL + rank) * {{inner}}LL + i % {{inner}}LL;
            values[at] = x[i];
            indices[at] = p;
        }
    }
}
