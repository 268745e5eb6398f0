{{enable}}// Einsum of {{operands}} operand(s): one invocation per output element ({{n}}, grid-stride)
// decodes its labels, then sums the products of the operands' elements over the
// {{terms}} combinations of the contracted labels, in {{acc}}.
{{bindings}}
{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        var r: u32 = i;
{{outer}}        var acc: {{acc}} = {{zero}};
        for (var q: u32 = 0u; q < {{terms}}u; q = q + 1u) {
            var rq: u32 = q;
{{inner}}            acc = {{add}};
        }
        out[i] = {{store}};
    }
}
