{{enable}}// {{what}}: [{{m}} x {{k}}] x [{{k}} x {{n}}] products over {{count}} outputs, one
// invocation per output in a grid-stride loop; the zero points subtracted, the
// products summed in 32 bits (wrapping){{how}}.
{{bindings}}
{{requant}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{count}}u; i = i + stride) {
        let col = i % {{n}}u;
        let row = (i / {{n}}u) % {{m}}u;
        var r = i / {{mn}}u;
        var ao = row * {{k}}u;
        var bo = col;
{{batch}}        let za = {{za}};
        let zb = {{zb}};
        var acc = 0u;
        for (var kk: u32 = 0u; kk < {{k}}u; kk = kk + 1u) {
            acc = acc + bitcast<u32>(i32(a[ao + kk]) - za) * bitcast<u32>(i32(b[bo + kk * {{n}}u]) - zb);
        }
{{store}}    }
}
