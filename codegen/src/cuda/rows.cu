// Row kernel ({{what}}): one block of {{block}} threads per row of {{d}} elements,
// statistics in fp32 with block-wide reductions (warp shuffles, then shared memory),
// the row read from global memory once per pass, one rounding at the store.
extern "C" __global__ void {{name}}({{params}}) {
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const long long base = {{base}};
    const {{t}}* __restrict__ xr = x + base;
    {{ot}}* __restrict__ yr = out + base;
{{body}}
}
