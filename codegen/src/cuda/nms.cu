// NonMaxSuppression of {{batches}} batches x {{classes}} classes x {{boxes}} boxes
// ({{format}}): one block of 1024 threads takes the (batch, class) pairs in order. Each
// step keeps the pair's next box: the best-scoring one (as the total order of the
// {{real}} bits; equal scores by the lower index) above the score threshold that no
// kept box suppresses, found by a strided scan and a tree reduction, which is the box
// the reference's walk down the sorted candidates keeps next. Thread 0 appends its row
// and the threads then flag it and every box it overlaps by more than the IoU
// threshold in a bitset in shared memory. A pair stops after `limit` (the
// max_output_boxes_per_class input, at most {{per_class}}) boxes or when no box is
// left. Rows (batch, class, box) are written at the running total, so the pairs' rows
// come out in order; thread 0 writes the total to status word {{slot}}. Arithmetic is
// rounded op by op (no contraction), like the reference's.
struct {{name}}_rect {
    {{real}} x0, x1, y0, y1;
};

// Rust's f64::max and f64::min: a NaN operand gives the other one.
static __device__ __forceinline__ {{real}} {{name}}_rmax({{real}} a, {{real}} b) {
    if (isnan(a)) {
        return b;
    }
    if (isnan(b)) {
        return a;
    }
    return a > b ? a : b;
}

static __device__ __forceinline__ {{real}} {{name}}_rmin({{real}} a, {{real}} b) {
    if (isnan(a)) {
        return b;
    }
    if (isnan(b)) {
        return a;
    }
    return a < b ? a : b;
}

// Box `i` of batch `b`: [x_center, y_center, width, height] when centered, else corners
// [y1, x1, y2, x2] in either order.
static __device__ __forceinline__ {{name}}_rect {{name}}_box(const {{t}}* __restrict__ boxes, unsigned int b, unsigned int i) {
    const unsigned int at = (b * {{boxes}}u + i) * 4u;
    const {{real}} c0 = gopt_ld(boxes[at]);
    const {{real}} c1 = gopt_ld(boxes[at + 1u]);
    const {{real}} c2 = gopt_ld(boxes[at + 2u]);
    const {{real}} c3 = gopt_ld(boxes[at + 3u]);
    if ({{center}}) {
        const {{real}} hw = {{mul}}(c2, 0.5);
        const {{real}} hh = {{mul}}(c3, 0.5);
        return {{name}}_rect{ {{sub}}(c0, hw), {{add}}(c0, hw), {{sub}}(c1, hh), {{add}}(c1, hh) };
    }
    return {{name}}_rect{ {{name}}_rmin(c1, c3), {{name}}_rmax(c1, c3), {{name}}_rmin(c0, c2), {{name}}_rmax(c0, c2) };
}

// Whether `a` and `b` overlap by more than `threshold` (intersection over union); any
// NaN on the way makes it false, as in the reference.
static __device__ __forceinline__ bool {{name}}_suppresses({{name}}_rect a, {{name}}_rect b, {{real}} threshold) {
    const {{real}} ix0 = {{name}}_rmax(a.x0, b.x0);
    const {{real}} ix1 = {{name}}_rmin(a.x1, b.x1);
    const {{real}} iy0 = {{name}}_rmax(a.y0, b.y0);
    const {{real}} iy1 = {{name}}_rmin(a.y1, b.y1);
    const {{real}} inter = {{mul}}({{sub}}(ix1, ix0), {{sub}}(iy1, iy0));
    const {{real}} area_a = {{mul}}({{sub}}(a.x1, a.x0), {{sub}}(a.y1, a.y0));
    const {{real}} area_b = {{mul}}({{sub}}(b.x1, b.x0), {{sub}}(b.y1, b.y0));
    const {{real}} uni = {{sub}}({{add}}(area_a, area_b), inter);
    const {{real}} ratio = {{div}}(inter, uni);
    // A finite ratio has no NaN before it, so the comparisons below are exact.
    if (isnan(ratio) || isnan(threshold)) {
        return false;
    }
    return ix1 > ix0 && iy1 > iy0 && inter > 0 && area_a > 0 && area_b > 0
        && uni > 0 && ratio > threshold;
}

// The total order of {{real}} as unsigned keys (total_cmp): larger key, larger score.
static __device__ __forceinline__ {{key_t}} {{name}}_key({{real}} s) {
    const {{key_t}} b = {{bits}}(s);
    if ((b >> {{sign_shift}}) != 0) {
        return ~b;
    }
    return b | (({{key_t}})1 << {{sign_shift}});
}

// Whether candidate (ka, ia) comes before (kb, ib): the higher score, then the lower
// index; NONE after everything.
static __device__ __forceinline__ bool {{name}}_before({{key_t}} ka, unsigned int ia, {{key_t}} kb, unsigned int ib) {
    return ia != 0xffffffffu && (ib == 0xffffffffu || ka > kb || (ka == kb && ia < ib));
}

extern "C" __global__ void __launch_bounds__(1024) {{name}}(const {{t}}* __restrict__ boxes, const {{t}}* __restrict__ scores, {{params}}long long* __restrict__ y, unsigned int* __restrict__ status) {
    const unsigned int NONE = 0xffffffffu;
    __shared__ {{key_t}} best_key[1024];
    __shared__ unsigned int best_idx[1024];
    __shared__ unsigned int cand;
    __shared__ unsigned int flags[{{words}}];
    __shared__ unsigned int kept;
    __shared__ unsigned int total;
    __shared__ unsigned int lim;
    const unsigned int t = threadIdx.x;
    if (t == 0u) {
        lim = {{limit}};
        total = 0u;
        kept = 0u;
    }
    __syncthreads();
    const unsigned int limit = lim;
    __syncthreads();
    const {{real}} iou = {{iou}};
    for (unsigned int p = 0u; p < {{pairs}}u; p = p + 1u) {
        const unsigned int b = p / {{classes}}u;
        const unsigned int sbase = p * {{boxes}}u;
        for (unsigned int w = t; w < {{words}}u; w = w + 1024u) {
            flags[w] = 0u;
        }
        for (unsigned int step = 0u; step < {{boxes}}u; step = step + 1u) {
            __syncthreads();
            const unsigned int k0 = kept;
            __syncthreads();
            if (k0 >= limit) {
                break;
            }
            {{key_t}} bk = 0;
            unsigned int bi = NONE;
            for (unsigned int i = t; i < {{boxes}}u; i = i + 1024u) {
                if ((flags[i >> 5u] & (1u << (i & 31u))) == 0u) {
                    const {{real}} s = gopt_ld(scores[sbase + i]);
                    const {{key_t}} k = {{name}}_key(s);
                    if (({{passes}}) && {{name}}_before(k, i, bk, bi)) {
                        bk = k;
                        bi = i;
                    }
                }
            }
            best_key[t] = bk;
            best_idx[t] = bi;
            __syncthreads();
            for (unsigned int off = 512u; off > 0u; off = off >> 1u) {
                if (t < off) {
                    if ({{name}}_before(best_key[t + off], best_idx[t + off], best_key[t], best_idx[t])) {
                        best_key[t] = best_key[t + off];
                        best_idx[t] = best_idx[t + off];
                    }
                }
                __syncthreads();
            }
            if (t == 0u) {
                const unsigned int c = best_idx[0];
                cand = c;
                if (c != NONE) {
                    const unsigned int row = (total + kept) * 3u;
                    y[row] = (long long)b;
                    y[row + 1u] = (long long)(p % {{classes}}u);
                    y[row + 2u] = (long long)c;
                    kept = kept + 1u;
                }
            }
            __syncthreads();
            const unsigned int ci = cand;
            __syncthreads();
            if (ci == NONE) {
                break;
            }
            // The kept box and the boxes it suppresses leave the candidates.
            const {{name}}_rect r = {{name}}_box(boxes, b, ci);
            for (unsigned int i = t; i < {{boxes}}u; i = i + 1024u) {
                const unsigned int bit = 1u << (i & 31u);
                if ((flags[i >> 5u] & bit) == 0u) {
                    if (i == ci || {{name}}_suppresses({{name}}_box(boxes, b, i), r, iou)) {
                        atomicOr(&flags[i >> 5u], bit);
                    }
                }
            }
            __syncthreads();
        }
        __syncthreads();
        if (t == 0u) {
            total = total + kept;
            kept = 0u;
        }
        __syncthreads();
    }
    if (t == 0u) {
        status[{{slot}}] = total;
    }
}
