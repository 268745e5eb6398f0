// Data movement ({{what}}) as a row crop: {{rows}} output rows of {{n}} elements, row r
// copied from input element {{base}} + r * {{stride}} on. Groups of {{group}} threads
// copy one tile (a row's next {{tile}} 16-byte vectors) at a time, {{chunks}} per row.
// The output row is split at its 16-byte boundaries: a scalar head and tail (by the
// row's first tile) and 16-byte stores between them. The input's 16-byte vectors are
// loaded aligned; when the run starts at another offset within 16 bytes than the
// output's boundary (per row: row starts move by the row length), the two vectors an
// output vector straddles are shifted together in registers. Both hold bytes of the
// run, so no load leaves the input's 16-byte blocks. Row bases are 64-bit, offsets
// within a row 32-bit, and no element needs a division.

// Bytes [sb, sb + 16) of the 32 bytes a:b (little-endian), sb in 1..15.
static __device__ __forceinline__ uint4 {{name}}_shift(uint4 a, uint4 b, unsigned int sb) {
    unsigned int w0, w1, w2, w3, w4;
    switch (sb >> 2) {
        case 0: w0 = a.x; w1 = a.y; w2 = a.z; w3 = a.w; w4 = b.x; break;
        case 1: w0 = a.y; w1 = a.z; w2 = a.w; w3 = b.x; w4 = b.y; break;
        case 2: w0 = a.z; w1 = a.w; w2 = b.x; w3 = b.y; w4 = b.z; break;
        default: w0 = a.w; w1 = b.x; w2 = b.y; w3 = b.z; w4 = b.w; break;
    }
    const unsigned int bits = (sb & 3u) * 8u;
    return make_uint4(__funnelshift_r(w0, w1, bits), __funnelshift_r(w1, w2, bits),
                      __funnelshift_r(w2, w3, bits), __funnelshift_r(w3, w4, bits));
}

extern "C" __global__ void {{name}}(const {{t}}* __restrict__ in0, {{t}}* __restrict__ out) {
    const unsigned int n = {{n}}u;
    const unsigned int lane = threadIdx.x % {{group}}u;
    const long long tiles = {{rows}}LL * {{chunks}}LL;
    const long long step = (long long)gridDim.x * {{groups}}LL;
    for (long long t = (long long)blockIdx.x * {{groups}}LL + threadIdx.x / {{group}}u; t < tiles;
         t += step) {
        const long long r = t / {{chunks}}LL;
        const unsigned int chunk = (unsigned int)(t - r * {{chunks}}LL);
        const {{t}}* src = in0 + ({{base}}LL + r * {{stride}}LL);
        {{t}}* dst = out + r * {{n}}LL;
        // Elements before the output row's first 16-byte boundary.
        unsigned int head = ((16u - (unsigned int)((unsigned long long)dst & 15ull)) & 15u) / {{elem}}u;
        head = min(head, n);
        const unsigned int body = (n - head) / {{vec}}u;
        const unsigned int rest = head + body * {{vec}}u;
        if (chunk == 0u) {
            for (unsigned int j = lane; j < head; j += {{group}}u) dst[j] = src[j];
            for (unsigned int j = rest + lane; j < n; j += {{group}}u) dst[j] = src[j];
        }
        const char* s = reinterpret_cast<const char*>(src + head);
        const unsigned int sb = (unsigned int)((unsigned long long)s & 15ull);
        const uint4* a = reinterpret_cast<const uint4*>(s - sb);
        uint4* d = reinterpret_cast<uint4*>(dst + head);
        const unsigned int k0 = chunk * {{tile}}u + lane;
        const unsigned int k1 = min(body, (chunk + 1u) * {{tile}}u);
        uint4 v[{{unroll}}];
        if (sb == 0u) {
#pragma unroll
            for (int u = 0; u < {{unroll}}; ++u) {
                const unsigned int k = k0 + u * {{group}}u;
                if (k < k1) v[u] = a[k];
            }
#pragma unroll
            for (int u = 0; u < {{unroll}}; ++u) {
                const unsigned int k = k0 + u * {{group}}u;
                if (k < k1) d[k] = v[u];
            }
        } else {
            uint4 w[{{unroll}}];
#pragma unroll
            for (int u = 0; u < {{unroll}}; ++u) {
                const unsigned int k = k0 + u * {{group}}u;
                if (k < k1) { v[u] = a[k]; w[u] = a[k + 1u]; }
            }
#pragma unroll
            for (int u = 0; u < {{unroll}}; ++u) {
                const unsigned int k = k0 + u * {{group}}u;
                if (k < k1) d[k] = {{name}}_shift(v[u], w[u], sb);
            }
        }
    }
}
