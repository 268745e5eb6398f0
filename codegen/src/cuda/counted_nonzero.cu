// NonZero of {{n}} elements (dims {{dims}}): one block of 1024 threads walks the data
// in chunks of 1024, flags the nonzero elements, scans the flags in shared memory
// (Hillis-Steele) and stores each flagged element's coordinates at its rank, column
// `rank` of the [{{rank}}, {{bound}}] output. Thread 0 writes the count to status word
// {{slot}}; the runtime keeps that many columns.
extern "C" __global__ void __launch_bounds__(1024) {{name}}(const {{t}}* __restrict__ x, long long* __restrict__ y, unsigned int* __restrict__ status) {
    __shared__ unsigned int scan[1024];
{{scan_init}}    for (long long start = 0; start < {{n}}LL; start += 1024LL) {
        const long long i = start + t;
        const unsigned int f = (i < {{n}}LL && {{nonzero}}) ? 1u : 0u;
{{scan_step}}        if (f) {
            const long long pos = (long long)base + scan[t] - 1;
            long long r = i;
{{coords}}        }
        __syncthreads();
        if (t == 1023u) {
            base += scan[1023];
        }
        __syncthreads();
    }
    if (t == 0) {
        status[{{slot}}] = base;
    }
}
