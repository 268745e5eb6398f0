{{enable}}// CausalConvWithState ({{k}} taps over {{len}} positions{{silu_note}}): one invocation per
// element of y, then of the new state (grid-stride); the padded input is the past
// state's {{km1}} positions followed by the input's.
{{bindings}}
fn padded(bc: u32, p: u32) -> f32 {
    if (p < {{km1}}u) {
        return {{past}};
    }
    return {{load_x}};
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    let ny = {{ny}}u;
    let total = ny + {{ns}}u;
    for (var i: u32 = gid.x; i < total; i = i + stride) {
        if (i < ny) {
            let t = i % {{len}}u;
            let bc = i / {{len}}u;
            let c = bc % {{channels}}u;
            var acc = 0.0;
            for (var j: u32 = 0u; j < {{k}}u; j = j + 1u) {
                acc = acc + padded(bc, t + j) * {{load_w}};
            }
{{bias}}            var v = {{round_acc}};
{{silu}}            y[i] = {{store_v}};
        } else {
{{state}}        }
    }
}
