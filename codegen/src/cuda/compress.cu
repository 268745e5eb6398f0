// Compress: x viewed as {{outer}} x {{d}} x {{inner}} around the axis, the slices whose
// entry of the {{len}}-long condition is true kept in order, the output laid out at its
// bound {{bound}} along the axis. One block of 1024 threads walks the condition in
// chunks of 1024, flags the true entries inside the axis, scans the flags in shared
// memory (Hillis-Steele), lists the chunk's flagged slices at their ranks in `sel`, and
// then copies them together, one element per thread at a time, to output positions
// `base + rank`. A true entry past the axis raises the node's code in status word 0.
// Thread 0 writes the count to status word {{slot}}; the runtime keeps that many slices.
extern "C" __global__ void __launch_bounds__(1024) {{name}}(const {{t}}* __restrict__ x, const unsigned char* __restrict__ cond, {{t}}* __restrict__ y, unsigned int* __restrict__ status) {
    __shared__ unsigned int scan[1024];
    __shared__ long long sel[1024];
{{scan_init}}    for (long long start = 0; start < {{len}}LL; start += 1024LL) {
        const long long j = start + t;
        unsigned int f = 0u;
        if (j < {{len}}LL) {
            if (cond[j] != 0) {
                if (j < {{d}}LL) {
                    f = 1u;
                } else {
{{raise}}                }
            }
        }
{{scan_step}}        if (f == 1u) {
            sel[scan[t] - 1u] = j;
        }
        __syncthreads();
        const long long c = scan[1023];
        const long long b = base;
        for (long long e = t; e < c * {{slice}}LL; e += 1024LL) {
            const long long q = e % {{inner}}LL;
            const long long rest = e / {{inner}}LL;
            const long long r = rest % c;
            const long long o = rest / c;
            y[(o * {{bound}}LL + b + r) * {{inner}}LL + q] = x[(o * {{d}}LL + sel[r]) * {{inner}}LL + q];
        }
        __syncthreads();
        if (t == 1023u) {
            base += (unsigned int)c;
        }
        __syncthreads();
    }
    if (t == 0) {
        status[{{slot}}] = base;
    }
}
