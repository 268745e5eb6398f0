{{enable}}// {{what}}: one invocation per element ({{n}}) in a grid-stride loop, f32 math, one
// rounding at the store.
{{bindings}}
{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
{{body}}    }
}
