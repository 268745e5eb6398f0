// {{what}}: one thread per output element (grid-stride) folds its {{inner}} elements in
// {{acc_name}} (the reduced axes are not one contiguous run, so each is decoded to an offset).
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    auto combine = []({{acc}} a, {{acc}} b) { return {{combine}}; };
    const long long total = {{total}}LL;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        long long base;
        { {{base}} base = off_; (void)r_; }
        {{acc}} acc = {{identity}};
        for (long long j = 0; j < {{inner}}LL; ++j) {
            {{offset}} (void)r_;
            const {{acc}} v = gopt_ld(x[base + off_]);
            acc = combine(acc, {{map}});
        }
        out[i] = {{store}};
    }
}
