{{enable}}// {{what}}: one invocation per output element in a grid-stride loop, {{how}}.
{{bindings}}
{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
{{pre}}    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
{{body}}    }
}
