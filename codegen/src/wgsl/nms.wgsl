{{enable}}// NonMaxSuppression of {{batches}} batches x {{classes}} classes x {{boxes}} boxes
// ({{format}}): one workgroup of 256 invocations takes the (batch, class) pairs in order.
// Each step keeps the pair's next box: the best-scoring one (as the total order of the
// f32 bits; equal scores by the lower index) above the score threshold that no kept box
// suppresses, found by a strided scan and a tree reduction, which is the box the
// reference's walk down the sorted candidates keeps next. Invocation 0 appends its row
// and the invocations then flag it and every box it overlaps by more than the IoU
// threshold in a bitset in workgroup memory. A pair stops after `limit` (the
// max_output_boxes_per_class input, at most {{per_class}}) boxes or when no box is
// left. Rows (batch, class, box) are i64 words, written at the running total, so the
// pairs' rows come out in order; invocation 0 writes the total to status word {{slot}}.
@group(0) @binding(0) var<storage, read> boxes: array<{{t}}>;
@group(0) @binding(1) var<storage, read> scores: array<{{t}}>;
{{bindings}}@group(0) @binding({{y_binding}}) var<storage, read_write> y: array<vec2<u32>>;
@group(0) @binding({{status_binding}}) var<storage, read_write> status: array<u32>;

const NONE: u32 = 0xffffffffu;
const CENTER: bool = {{center}};

var<workgroup> best_key: array<u32, 256>;
var<workgroup> best_idx: array<u32, 256>;
var<workgroup> cand: u32;
var<workgroup> flags: array<atomic<u32>, {{words}}>;
var<workgroup> kept: u32;
var<workgroup> total: u32;
var<workgroup> lim: u32;

// A box as (x_min, x_max, y_min, y_max).
struct Rect {
    x0: f32,
    x1: f32,
    y0: f32,
    y1: f32,
}

{{helpers}}// Rust's f64::max and f64::min: a NaN operand gives the other one.
fn rmax(a: f32, b: f32) -> f32 {
    if (gopt_isnan(a)) {
        return b;
    }
    if (gopt_isnan(b)) {
        return a;
    }
    return max(a, b);
}

fn rmin(a: f32, b: f32) -> f32 {
    if (gopt_isnan(a)) {
        return b;
    }
    if (gopt_isnan(b)) {
        return a;
    }
    return min(a, b);
}

// Coordinate `i` of the boxes and score `i`, in f32.
fn coord(i: u32) -> f32 {
    return {{load_box}};
}

fn score(i: u32) -> f32 {
    return {{load_score}};
}

// Box `i` of batch `b`: [x_center, y_center, width, height] when CENTER, else corners
// [y1, x1, y2, x2] in either order.
fn rect(b: u32, i: u32) -> Rect {
    let at = (b * {{boxes}}u + i) * 4u;
    let c0 = coord(at);
    let c1 = coord(at + 1u);
    let c2 = coord(at + 2u);
    let c3 = coord(at + 3u);
    if (CENTER) {
        let hw = c2 * 0.5;
        let hh = c3 * 0.5;
        return Rect(c0 - hw, c0 + hw, c1 - hh, c1 + hh);
    }
    return Rect(rmin(c1, c3), rmax(c1, c3), rmin(c0, c2), rmax(c0, c2));
}

// Whether `a` and `b` overlap by more than `threshold` (intersection over union); any
// NaN on the way makes it false, as in the reference.
fn suppresses(a: Rect, b: Rect, threshold: f32) -> bool {
    let ix0 = rmax(a.x0, b.x0);
    let ix1 = rmin(a.x1, b.x1);
    let iy0 = rmax(a.y0, b.y0);
    let iy1 = rmin(a.y1, b.y1);
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let area_a = (a.x1 - a.x0) * (a.y1 - a.y0);
    let area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
    let uni = area_a + area_b - inter;
    let ratio = gopt_div(inter, uni);
    // A finite ratio has no NaN before it, so the comparisons below are exact.
    if (gopt_isnan(ratio) || gopt_isnan(threshold)) {
        return false;
    }
    return ix1 > ix0 && iy1 > iy0 && inter > 0.0 && area_a > 0.0 && area_b > 0.0
        && uni > 0.0 && ratio > threshold;
}

// The total order of f32 as u32 keys (f64::total_cmp): larger key, larger score.
fn key(s: f32) -> u32 {
    let b = bitcast<u32>(s);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// Whether candidate (ka, ia) comes before (kb, ib): the higher score, then the lower
// index; NONE after everything.
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ia != NONE && (ib == NONE || ka > kb || (ka == kb && ia < ib));
}

// Whether score `s` passes the score threshold.
fn passes(s: f32) -> bool {
    return {{passes}};
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    if (t == 0u) {
        lim = {{limit}};
        total = 0u;
        kept = 0u;
    }
    let limit = workgroupUniformLoad(&lim);
    let iou = {{iou}};
    for (var p: u32 = 0u; p < {{pairs}}u; p = p + 1u) {
        let b = p / {{classes}}u;
        let sbase = p * {{boxes}}u;
        for (var w: u32 = t; w < {{words}}u; w = w + 256u) {
            atomicStore(&flags[w], 0u);
        }
        for (var step: u32 = 0u; step < {{boxes}}u; step = step + 1u) {
            if (workgroupUniformLoad(&kept) >= limit) {
                break;
            }
            var bk = 0u;
            var bi = NONE;
            for (var i: u32 = t; i < {{boxes}}u; i = i + 256u) {
                if ((atomicLoad(&flags[i >> 5u]) & (1u << (i & 31u))) == 0u) {
                    let s = score(sbase + i);
                    let k = key(s);
                    if (passes(s) && before(k, i, bk, bi)) {
                        bk = k;
                        bi = i;
                    }
                }
            }
            best_key[t] = bk;
            best_idx[t] = bi;
            workgroupBarrier();
            for (var off: u32 = 128u; off > 0u; off = off >> 1u) {
                if (t < off) {
                    if (before(best_key[t + off], best_idx[t + off], best_key[t], best_idx[t])) {
                        best_key[t] = best_key[t + off];
                        best_idx[t] = best_idx[t + off];
                    }
                }
                workgroupBarrier();
            }
            if (t == 0u) {
                let c = best_idx[0];
                cand = c;
                if (c != NONE) {
                    let row = (total + kept) * 3u;
                    y[row] = vec2<u32>(b, 0u);
                    y[row + 1u] = vec2<u32>(p % {{classes}}u, 0u);
                    y[row + 2u] = vec2<u32>(c, 0u);
                    kept = kept + 1u;
                }
            }
            let ci = workgroupUniformLoad(&cand);
            if (ci == NONE) {
                break;
            }
            // The kept box and the boxes it suppresses leave the candidates.
            let r = rect(b, ci);
            for (var i: u32 = t; i < {{boxes}}u; i = i + 256u) {
                let bit = 1u << (i & 31u);
                if ((atomicLoad(&flags[i >> 5u]) & bit) == 0u) {
                    if (i == ci || suppresses(rect(b, i), r, iou)) {
                        atomicOr(&flags[i >> 5u], bit);
                    }
                }
            }
            workgroupBarrier();
        }
        workgroupBarrier();
        if (t == 0u) {
            total = total + kept;
            kept = 0u;
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        status[{{slot}}] = total;
    }
}
