// Data movement ({{what}}): one thread per output element (grid-stride); the output's
// coordinates map to the input offset it copies from.
extern "C" __global__ void {{name}}({{params}}) {
    const long long n = {{n}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
{{body}}    }
}
