{{enable}}// {{what}}: a direct {{spatial}}-D convolution ({{m}} output channels, {{group}} groups,
// {{cg}} input channels x {{taps}} taps per output), one invocation per output element
// in a grid-stride loop; the zero points subtracted (padding reads nothing), the
// products summed in 32 bits (wrapping){{how}}.
{{bindings}}
{{requant}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{count}}u; i = i + stride) {
        var r = i;
{{coords}}        let oc = r % {{m}}u;
        let nb = r / {{m}}u;
        let xb = (nb * {{c}}u + (oc / {{mg}}u) * {{cg}}u) * {{in_size}}u;
        let wb = oc * {{cg}}u * {{taps}}u;
        let zx = {{zx}};
        let zw = {{zw}};
        var acc = {{acc0}};
        for (var ci: u32 = 0u; ci < {{cg}}u; ci = ci + 1u) {
            for (var t: u32 = 0u; t < {{taps}}u; t = t + 1u) {
                var tr = t;
                var ok = true;
                var at = 0i;
{{taps_code}}                if (ok) {
                    acc = acc + bitcast<u32>(i32(x[xb + ci * {{in_size}}u + u32(at)]) - zx) * bitcast<u32>(i32(w[wb + ci * {{taps}}u + t]) - zw);
                }
            }
        }
{{store}}    }
}
