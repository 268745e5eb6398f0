// MaxUnpool in one block of 256: zero the output, then place the input 256 elements at
// a time, in order, each at the output position its index names. Within a batch the
// last of equal positions wins (each thread looks at the later ones' slots); the
// batches run in order, so later elements overwrite earlier ones, as in the
// interpreter's sequential loop. An index outside the default-sized output raises
// the node's code in gopt_err and is skipped; a position the output shape cuts off is
// dropped.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}, unsigned int* __restrict__ gopt_err) {
    __shared__ long long slot[256];
    const int t = threadIdx.x;
    for (long long i = t; i < {{total}}LL; i += 256) {
        out[i] = {{t}}();
    }
    __syncthreads();
    for (long long base = 0; base < {{len}}LL; base += 256) {
        const long long j = base + t;
        long long at = -1;
        if (j < {{len}}LL) {
            const long long f = (long long)idx[j];
            if (f < 0 || f >= {{limit}}LL) {
                atomicMax(gopt_err, {{code}}u);
            } else {
{{place}}            }
        }
        slot[t] = at;
        __syncthreads();
        bool last = at != -1;
        for (int u = t + 1; u < 256; ++u) {
            if (slot[u] == at) {
                last = false;
            }
        }
        if (last) {
            out[at] = x[j];
        }
        __syncthreads();
    }
}
