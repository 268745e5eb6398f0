{{enable}}// LinearAttention, {{rule}} rule over {{steps}} steps: {{kv_heads}} kv heads, each with a
// {{dk}} x {{dv}} state and {{group}} query heads. One invocation per (batch, kv head, value
// column) (grid-stride) runs the whole sequence on its column of the state, kept in a private
// array: every column evolves on its own. Computed in f32, rounded only when stored.
{{bindings}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{columns}}u; i = i + stride) {
        let j = i % {{dv}}u;
        let bg = i / {{dv}}u;
        let g = bg % {{kv_heads}}u;
        let b = bg / {{kv_heads}}u;
        var s: array<f32, {{dk}}>;
        for (var d: u32 = 0u; d < {{dk}}u; d = d + 1u) {
            s[d] = {{past}};
        }
        for (var t: u32 = 0u; t < {{steps}}u; t = t + 1u) {
            let row = b * {{steps}}u + t;
            let kb = row * {{kw}}u + g * {{dk}}u;
{{decay}}            var u = {{load_v}};
{{delta}}            for (var d: u32 = 0u; d < {{dk}}u; d = d + 1u) {
                s[d] = s[d] + {{load_k}} * u;
            }
            for (var r: u32 = 0u; r < {{group}}u; r = r + 1u) {
                let h = g * {{group}}u + r;
                let qb = row * {{qw}}u + h * {{dk}}u;
                var o = 0.0;
                for (var d: u32 = 0u; d < {{dk}}u; d = d + 1u) {
                    o = o + {{load_q}} * s[d];
                }
                out[row * {{ow}}u + h * {{dv}}u + j] = {{store_out}};
            }
        }
{{state}}    }
}
