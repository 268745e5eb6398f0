{{enable}}// {{what}} ({{mode}}): one invocation per element in a grid-stride loop, each summing
// (or multiplying) its lane up to itself in the reference's order; float math in f32,
// integers wrapped to their width, 64-bit integers exact.
{{bindings}}
{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
{{axis}}    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let j = (i / inner) % d;
        let base = i - j * inner;
        let lo = {{lo}};
        let hi = {{hi}};
        var acc = {{init}};
        for (var s: u32 = 0u; s + lo < hi; s = s + 1u) {
            let t = {{t}};
            let v = {{load}};
            acc = {{combine}};
        }
        out[i] = {{store}};
    }
}
