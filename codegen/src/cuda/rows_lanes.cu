// Row kernel ({{what}}) along a strided axis: one thread per row of {{d}} elements
// {{inner}} apart (grid-stride over {{rows}} rows), so adjacent threads read adjacent
// elements in every pass; statistics in fp32, one rounding at the store.
extern "C" __global__ void {{name}}({{params}}) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < {{rows}}LL; row += stride) {
        const long long base = (row / {{inner}}LL) * {{span}}LL + row % {{inner}}LL;
        const {{t}}* __restrict__ xr = x + base;
        {{ot}}* __restrict__ yr = out + base;
{{body}}    }
}
