// Einsum of {{operands}} operand(s): one thread per output element ({{n}}, grid-stride)
// decodes its labels, then sums the products of the operands' elements over the
// {{terms}} combinations of the contracted labels, in {{acc}}.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long r = i;
{{outer}}        (void)r;
        {{acc}} acc = {{zero}};
        for (long long q = 0; q < {{terms}}LL; ++q) {
            long long rq = q;
{{inner}}            (void)rq;
            acc = acc + {{term}};
        }
        out[i] = {{store}};
    }
}
