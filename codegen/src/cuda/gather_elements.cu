// GatherElements along axis {{axis}}: one thread per output element (grid-stride), the
// output coordinates unrolled with constant divisors; a negative index counts from the
// end of the axis, one out of range raises the node's code in gopt_err and reads
// element 0 of the axis, never outside the data.
extern "C" __global__ void __launch_bounds__(256) {{name}}(const {{t}}* __restrict__ data, const {{it}}* __restrict__ idx, {{t}}* __restrict__ out, unsigned int* __restrict__ gopt_err) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long k = (long long)idx[i];
        if (k < 0) k += {{len}}LL;
        if (k < 0 || k >= {{len}}LL) {
            atomicMax(gopt_err, {{code}}u);
            k = 0;
        }
        long long r = i;
        long long at = k * {{kstride}}LL;
{{coords}}        (void)r;
        out[i] = data[at];
    }
}
