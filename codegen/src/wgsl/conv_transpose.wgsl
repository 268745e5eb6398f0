{{enable}}// ConvTranspose ({{rank}}-D, {{group}} group(s)) as a gather: one invocation per output
// element (grid-stride) walks its group's input channels and the kernel taps, keeping
// each tap whose input position (o + pad - k * dilation) / stride divides exactly
// inside the input; f32 sums, one rounding at the store.
{{bindings}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
{{decode}}        let m = r % {{m}}u;
        let n = r / {{m}}u;
        let grp = m / {{mg}}u;
        let mo = m % {{mg}}u;
        var acc: f32 = 0.0;
        for (var cc: u32 = 0u; cc < {{cg}}u; cc = cc + 1u) {
            let ch = grp * {{cg}}u + cc;
            let xb = (n * {{c}}u + ch) * {{pin}}u;
            let wb = (ch * {{mg}}u + mo) * {{taps}}u;
{{walk}}        }
        out[i] = {{t}}(acc{{bias}});
    }
}
