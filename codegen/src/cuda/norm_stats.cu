// {{what}}: {{groups}} groups of {{len}} elements, one block per group (grid-stride over
// groups): the mean, then the second pass ({{second}}), each an f32 block sum, then
// every element normalized.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    __shared__ float red[32];
    // The offset of element j of a group from the group's first.
    auto at = [](long long j) -> long long {
{{offset}}    };
    for (long long grp = blockIdx.x; grp < {{groups}}LL; grp += gridDim.x) {
{{base}}        float s1 = 0.0f;
        for (long long j = threadIdx.x; j < {{len}}LL; j += 256) {
            s1 = s1 + gopt_ld(x[base + at(j)]);
        }
        const float mean = gopt_block_sum(s1, red) / {{len}}.0f;
        float s2 = 0.0f;
        for (long long j = threadIdx.x; j < {{len}}LL; j += 256) {
            const float v = gopt_ld(x[base + at(j)]);
{{accumulate}}        }
        const float second = gopt_block_sum(s2, red) / {{len}}.0f;
{{prepare}}        for (long long j = threadIdx.x; j < {{len}}LL; j += 256) {
            const float v = gopt_ld(x[base + at(j)]);
{{normalize}}        }
{{finish}}    }
}
