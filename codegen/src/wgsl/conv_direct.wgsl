{{enable}}// {{what}} (direct, one input channel per group): {{desc}}. One invocation per output
// element (grid-stride), the taps in constant loops, f32 multiply-then-add in tap
// order (the reference interpreter's arithmetic), fused epilogue, one rounding.
{{bindings}}
{{helpers}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
{{decode}}        let ic = oc / {{mult}}u;
        let p = oh * {{ow}}u + ow;
        let xb = {{xplane}};
        let wb = oc * {{taps}}u;
        var acc_: f32 = 0.0;
        for (var kh: u32 = 0u; kh < {{kh}}u; kh = kh + 1u) {
            let ih = i32(oh * {{sh}}u + kh * {{dh}}u) - {{ph}};
            if (ih < 0 || ih >= {{h}}) { continue; }
            for (var kw: u32 = 0u; kw < {{kw}}u; kw = kw + 1u) {
                let iw = i32(ow * {{sw}}u + kw * {{dw}}u) - {{pw}};
                if (iw < 0 || iw >= {{w}}) { continue; }
                acc_ = acc_ + f32(x[xb + {{xoff}}]) * f32(w[wb + kh * {{kw}}u + kw]);
            }
        }
{{epilogue}}    }
}
