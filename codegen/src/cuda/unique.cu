// Unique of {{d}} slices of {{outer}} × {{inner}} elements (the slices along the axis,
// or the elements of the flattened data), compared lexicographically (NaN after every
// number, all NaNs equal), the unique ones {{order}}. One block of 1024 threads:
// phase 1 flags, one thread per slice, the slices no earlier slice equals (first
// occurrences) in a bitmask in shared memory; phase 2 gives each slice the rank of its
// group ({{rank_what}}), and each first occurrence stores its slice of Y, its index and
// its group's size at that rank. Thread 0 counts the flags into the status words of the
// counted outputs; the runtime keeps that many.
extern "C" __global__ void __launch_bounds__(1024) {{name}}(const {{t}}* __restrict__ x, {{t}}* __restrict__ y, {{params}}unsigned int* __restrict__ status) {
    __shared__ unsigned int flags[{{words}}];
    const unsigned int t = threadIdx.x;
    // Elements a and b compared: -1, 0 or 1.
    auto cmp_elem = []({{t}} a, {{t}} b) -> int {
{{cmp}}
    };
    // Slices a and b compared lexicographically (outer, then inner order): -1, 0 or 1.
    auto cmp_slices = [&](unsigned int a, unsigned int b) -> int {
{{cmp_slices}}        return 0;
    };
    // Whether slice i is the first occurrence of its group (after phase 1).
    auto is_first = [&](unsigned int i) -> bool {
        return ((flags[i >> 5u] >> (i & 31u)) & 1u) == 1u;
    };
    // The rank of slice i's group in Y.
    auto rank_of = [&](unsigned int i) -> unsigned int {
        unsigned int rank = 0u;
{{rank}}
        return rank;
    };
    for (unsigned int w = t; w < {{words}}u; w += 1024u) {
        flags[w] = 0u;
    }
    __syncthreads();
    for (unsigned int i = t; i < {{d}}u; i += 1024u) {
        bool f = true;
        for (unsigned int j = 0u; j < i; ++j) {
            if (cmp_slices(j, i) == 0) {
                f = false;
                break;
            }
        }
        if (f) {
            atomicOr(&flags[i >> 5u], 1u << (i & 31u));
        }
    }
    __syncthreads();
    for (unsigned int i = t; i < {{d}}u; i += 1024u) {
        const unsigned int rank = rank_of(i);
        if (is_first(i)) {
{{copy}}{{store_first}}        }
{{store_inverse}}    }
    if (t == 0u) {
        unsigned int total = 0u;
        for (unsigned int w = 0u; w < {{words}}u; ++w) {
            total += __popc(flags[w]);
        }
{{store_counts}}    }
}
