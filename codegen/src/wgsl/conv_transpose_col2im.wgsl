{{enable}}// Col2Im ({{rank}}-D) as a gather: one invocation per output element (grid-stride)
// walks the block taps, keeping each tap whose block position
// (p + pad - k * dilation) / stride divides exactly inside the block grid, and sums
// that column's element; f32 sums, one rounding at the store.
{{bindings}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
{{decode}}        let xb = r * {{block}}u;
        var acc: f32 = 0.0;
{{walk}}        out[i] = {{t}}(acc);
    }
}
