{{enable}}// Trilu ({{what}} triangle, last two axes {{h}} x {{w}}): one invocation per element
// in a grid-stride loop, elements off the triangle set to zero (copied as storage
// elements otherwise).
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
{{kbinding}}@group(0) @binding({{obinding}}) var<storage, read_write> out: array<{{t}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
{{k}}    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let c = i32(i % {{w}}u);
        let r = i32((i / {{w}}u) % {{h}}u);
        out[i] = select({{t}}(), x[i], c - r {{cmp}} k);
    }
}
