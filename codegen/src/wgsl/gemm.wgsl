{{enable}}// Gemm ({{m}} x {{k}} by {{k}} x {{n}}{{how}}): one invocation per output element in a
// grid-stride loop, f32 accumulation over k, alpha and beta * C applied in f32, one
// rounding at the store.
{{bindings}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{mn}}u; i = i + stride) {
        let r = i / {{n}}u;
        let c = i % {{n}}u;
        var acc: f32 = 0.0;
        for (var j: u32 = 0u; j < {{k}}u; j = j + 1u) {
            acc = acc + f32(a[{{aat}}]) * f32(b[{{bat}}]);
        }
        y[i] = {{t}}({{result}});
    }
}
