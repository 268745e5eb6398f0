// LinearAttention, {{rule}} rule over {{steps}} steps: {{kv_heads}} kv heads, each with a
// {{dk}} x {{dv}} state and {{group}} query heads. One thread per (batch, kv head, value
// column) (grid-stride) runs the whole sequence on its column of the state, kept in
// registers: every column evolves on its own. Computed in f32, rounded only when stored.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long n = {{columns}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long j = i % {{dv}}LL;
        const long long bg = i / {{dv}}LL;
        const long long g = bg % {{kv_heads}}LL;
        const long long b = bg / {{kv_heads}}LL;
        float s[{{dk}}];
#pragma unroll
        for (int d = 0; d < {{dk}}; ++d) {
            s[d] = {{past}};
        }
        for (long long t = 0; t < {{steps}}LL; ++t) {
            const long long row = b * {{steps}}LL + t;
            const long long kb = row * {{kw}}LL + g * {{dk}}LL;
{{decay}}            float u = gopt_ld(v[row * {{vw}}LL + g * {{dv}}LL + j]);
{{delta}}#pragma unroll
            for (int d = 0; d < {{dk}}; ++d) {
                s[d] += gopt_ld(k[kb + d]) * u;
            }
            for (long long r = 0; r < {{group}}LL; ++r) {
                const long long h = g * {{group}}LL + r;
                const long long qb = row * {{qw}}LL + h * {{dk}}LL;
                float o = 0.0f;
#pragma unroll
                for (int d = 0; d < {{dk}}; ++d) {
                    o += gopt_ld(q[qb + d]) * s[d];
                }
                out[row * {{ow}}LL + h * {{dv}}LL + j] = {{store_out}};
            }
        }
{{state}}    }
}
