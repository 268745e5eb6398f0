{{enable}}// {{what}} of {{n}} elements: one invocation per element in a grid-stride loop, each
// element's scale and zero point found by the parameter map ({{params}}).
{{bindings}}
{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let s = f32(scale[{{sidx}}]);
        let z = {{zero}};
{{body}}    }
}
