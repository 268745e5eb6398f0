{{enable}}// AffineGrid ({{k}} spatial dims {{sizes}}, align_corners {{align}}): one invocation per
// output component in a grid-stride loop: row r of theta[b] times the homogeneous
// base-grid point (x, y, (z), 1). Each base coordinate is an exact integer ratio
// rounded once; the products are fused into the sum.
@group(0) @binding(0) var<storage, read> theta: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{t}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let r = i % {{k}}u;
        var p = i / {{k}}u;
{{coords}}        let tb = p * {{mat}}u + r * {{row}}u;
        var acc = f32(theta[tb + {{k}}u]);
{{dot}}        out[i] = {{t}}(acc);
    }
}
