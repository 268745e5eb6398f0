{{enable}}// RotaryEmbedding ({{dtype}} data, fp32 math): one invocation per output element in a
// grid-stride loop. Channel c < RD of a head is one half of a pair (x1, x2) rotated by the
// cos/sin of its batch and position: cos·x1 - sin·x2 (first) or sin·x1 + cos·x2 (second);
// channels past RD are copied.
{{bindings}}
const N: u32 = {{n}}u;
const D: u32 = {{d}}u;
const RD: u32 = {{rd}}u;
const HALF: u32 = {{half}}u;
const INTERLEAVED: bool = {{interleaved}};

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var e: u32 = gid.x; e < N; e = e + stride) {
        let c = e % D;
        let base = e - c;
        if (c >= RD) {
            y[e] = x[e];
            continue;
        }
        var r: u32 = e / D;
{{coords}}        var pair: u32 = c;
        var first = c < HALF;
        var i1: u32 = c;
        var i2: u32 = c + HALF;
        if (INTERLEAVED) {
            pair = c / 2u;
            first = c % 2u == 0u;
            i1 = 2u * pair;
            i2 = i1 + 1u;
        } else if (!first) {
            pair = c - HALF;
            i1 = pair;
            i2 = c;
        }
{{row}}        let co = f32(cos_c[row + pair]);
        let si = f32(sin_c[row + pair]);
        let x1 = f32(x[base + i1]);
        let x2 = f32(x[base + i2]);
        var v: f32 = si * x1 + co * x2;
        if (first) { v = co * x1 - si * x2; }
        y[e] = {{t}}(v);
    }
}
