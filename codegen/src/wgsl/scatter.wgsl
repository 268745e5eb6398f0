{{enable}}// {{what}}: one invocation per output element in a grid-stride loop copies its data
// element, then applies, in the interpreter's order, the updates that land on it
// ({{how}}).
{{bindings}}
{{helpers}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        var v: {{t}} = data[i];
{{body}}        out[i] = v;
    }
}
