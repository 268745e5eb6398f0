// Row kernel ({{what}}): one block of {{block}} threads per row of {{d}} elements,
// statistics in fp32 with block-wide reductions (warp shuffles, then shared memory),
// the row read from global memory once per pass, one rounding at the store.
extern "C" __global__ void {{name}}({{params}}) {
    __shared__ float red[32];
    const long long row = blockIdx.x;
    const {{t}}* __restrict__ xr = x + row * {{d}}LL;
    {{t}}* __restrict__ yr = out + row * {{d}}LL;
{{body}}
}
