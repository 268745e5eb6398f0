{{enable}}// {{what}}: one invocation per output bin (grid-stride), a direct sum over the {{n}}
// lane elements with exact twiddles at the quarter turns; f32 accumulation.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
{{wbinding}}@group(0) @binding({{obinding}}) var<storage, read_write> out: array<{{t}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var b: u32 = gid.x; b < {{total}}u; b = b + stride) {
        let i = b % {{inner}}u;
        var r = b / {{inner}}u;
        let k = r % {{bins}}u;
        r = r / {{bins}}u;
        let f = r % {{frames}}u;
        let o = r / {{frames}}u;
        let base = o * {{outer_stride}}u + f * {{frame_stride}}u + i;
        var acc_re = 0.0;
        var acc_im = 0.0;
        for (var j: u32 = 0u; j < {{lanes}}u; j = j + 1u) {
{{lane}}
            let q = (j * k) % {{n}}u;
            var c: f32;
            var s: f32;
            if ((4u * q) % {{n}}u == 0u) {
                let quarter = (4u * q) / {{n}}u;
                c = select(select(0.0, -1.0, quarter == 2u), 1.0, quarter == 0u);
                s = select(select(0.0, -1.0, quarter == 3u), 1.0, quarter == 1u);
            } else {
                let theta = 6.283185307179586 * f32(q) / {{n}}.0;
                c = cos(theta);
                s = sin(theta);
            }
            s = {{sign}}s;
            acc_re = acc_re + re * c - im * s;
            acc_im = acc_im + re * s + im * c;
        }
        out[b * {{out_comps}}u] = {{store_re}};
{{store_im}}    }
}
