{{enable}}// {{what}} (direct 3-D convolution): {{desc}}.
// One invocation per output element (grid-stride), decoded in Y's layout: its group's
// {{cg}} input channels x {{kd}}x{{kh}}x{{kw}} taps summed in f32 (taps outer, so one bounds
// check per tap covers every channel), then the fused epilogue and one rounding at
// the store.
{{bindings}}
{{helpers}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
{{decode}}        let g = oc / {{mg}}u;
        let xb = {{xbase}};
        let wb = oc * {{wrow}}u;
        var acc_: f32 = 0.0;
        for (var kd: u32 = 0u; kd < {{kd}}u; kd = kd + 1u) {
            let xd = i32(od * {{sd}}u + kd * {{dd}}u) - {{pd}};
            if (xd < 0 || xd >= {{d}}) { continue; }
            for (var kh: u32 = 0u; kh < {{kh}}u; kh = kh + 1u) {
                let xh = i32(oh * {{sh}}u + kh * {{dh}}u) - {{ph}};
                if (xh < 0 || xh >= {{h}}) { continue; }
                for (var kw: u32 = 0u; kw < {{kw}}u; kw = kw + 1u) {
                    let xw = i32(ow * {{sw}}u + kw * {{dw}}u) - {{pw}};
                    if (xw < 0 || xw >= {{w}}) { continue; }
                    let xo = xb + {{xoff}};
                    let wo = wb + (kd * {{kh}}u + kh) * {{kw}}u + kw;
                    for (var ci: u32 = 0u; ci < {{cg}}u; ci = ci + 1u) {
                        acc_ = acc_ + f32(x[xo + ci * {{xcs}}u]) * f32(w[wo + ci * {{taps}}u]);
                    }
                }
            }
        }
{{epilogue}}    }
}
