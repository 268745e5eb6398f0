{{enable}}// SwiGLU ({{what}}): y = a * sigmoid({{alpha}} * a) * b, one invocation per element in a
// grid-stride loop, computed in f32{{note}}.
@group(0) @binding(0) var<storage, read> a: array<{{t}}>;
@group(0) @binding(1) var<storage, read> b: array<{{t}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{t}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let x = f32(a[i]);
        let s = {{sig}};
        let xs = {{xs}};
        out[i] = {{t}}(xs * f32(b[i]));
    }
}
