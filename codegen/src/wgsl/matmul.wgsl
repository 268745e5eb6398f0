{{enable}}// {{what}}: a 16x16 output tile per workgroup, A and B tiles of 16 along K staged in
// workgroup memory, fp32 accumulation; epilogue y = {{formula}}.
{{bindings}}
var<workgroup> at: array<array<f32, 16>, 16>;
var<workgroup> bt: array<array<f32, 16>, 16>;

fn gopt_erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

fn gopt_sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.y * 16u + lid.y;
    let col = wid.x * 16u + lid.x;
    let batch = wid.z;
    let abase = batch * {{stride_a}}u;
    let bbase = batch * {{stride_b}}u;
    var acc: f32 = 0.0;
    for (var k0: u32 = 0u; k0 < {{k}}u; k0 = k0 + 16u) {
        let ka = k0 + lid.x;
        at[lid.y][lid.x] = select(0.0, f32(a[abase + row * {{k}}u + ka]), row < {{m}}u && ka < {{k}}u);
        let kb = k0 + lid.y;
        bt[lid.y][lid.x] = select(0.0, f32(b[bbase + {{b_index}}]), kb < {{k}}u && col < {{n}}u);
        workgroupBarrier();
        for (var j: u32 = 0u; j < 16u; j = j + 1u) {
            acc = acc + at[lid.y][j] * bt[j][lid.x];
        }
        workgroupBarrier();
    }
    if (row < {{m}}u && col < {{n}}u) {
        let o = batch * {{stride_d}}u + row * {{n}}u + col;
        var v: f32 = acc * {{alpha}};
{{epilogue}}        y[o] = {{store}};
    }
}
