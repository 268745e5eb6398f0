{{enable}}// GridSample ({{mode}}, padding {{padding}}, align_corners {{align}}, {{k}} spatial dims): one
// invocation per output element in a grid-stride loop. Each grid component is
// denormalized in f32 and moved into the image by the padding rule; then up to four
// taps per dim (index, weight) are combined as a tensor product, taps that read the
// zero padding (index -1) dropped.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read> grid: array<{{gt}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{t}}>;

// The taps along one dim: image indices (-1: reads zero) and weights.
struct Taps {
    idx: vec4<i32>,
    w: vec4<f32>,
}

// `v` folded into [lo, hi] at the borders.
fn gs_reflect(v: f32, lo: f32, hi: f32) -> f32 {
    let rng = hi - lo;
    if (rng <= 0.0) {
        return lo;
    }
    if (v < lo) {
        let dx = lo - v;
        let n = trunc(dx / rng);
        let r = dx - n * rng;
        return select(hi - r, lo + r, n - 2.0 * floor(n * 0.5) == 0.0);
    }
    if (v > hi) {
        let dx = v - hi;
        let n = trunc(dx / rng);
        let r = dx - n * rng;
        return select(lo + r, hi - r, n - 2.0 * floor(n * 0.5) == 0.0);
    }
    return v;
}

// Tap index `i` along a dim of `len` samples, by the padding rule (-1: zero).
fn gs_pad(i: i32, len: i32, lo: f32, hi: f32) -> i32 {
{{pad}}}

// Grid component `v` denormalized along a dim of `len` samples, moved into the
// image by the padding rule.
fn gs_coord(v: f32, len: f32, lo: f32, hi: f32) -> f32 {
    var c = {{denorm}};
{{fold}}    return c;
}

// The taps at coordinate `c` along a dim of `len` samples (a tap index far outside
// is clamped first: such taps read the padding either way).
fn gs_tap(c: f32, len: i32, lo: f32, hi: f32) -> Taps {
    var r: Taps;
{{taps}}    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let o = i % {{points}}u;
        let nc = i / {{points}}u;
        let g = (nc / {{c}}u * {{points}}u + o) * {{k}}u;
        let xb = nc * {{plane}}u;
{{dims}}        var acc: f32 = 0.0;
{{loops}}        out[i] = {{t}}(acc);
    }
}
