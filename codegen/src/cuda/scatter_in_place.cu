// TensorScatter in place: the output is the cache's own memory (a graph input nothing
// else reads), so one thread per update element writes it at its batch entry's write
// index and the rest of the cache is left as it is ({{how}}).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long in_ = i % {{inner}}LL;
        const long long q = (i / {{inner}}LL) % {{seq}}LL;
        const long long p = i / {{row}}LL;
{{position}}        out[(p * {{max_seq}}LL + s) * {{inner}}LL + in_] = upd[i];
    }
}
