{{enable}}// Det of {{batch}} {{m}} x {{m}} matrices: one invocation per matrix (grid-stride) copies
// it into private memory and eliminates with partial pivoting in f32 (the last of
// equally large pivots, NaN largest; a zero pivot gives 0), the determinant the
// product of the pivots, negated per row swap.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{t}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    var a: array<f32, {{mm}}>;
    for (var b: u32 = gid.x; b < {{batch}}u; b = b + stride) {
        for (var k: u32 = 0u; k < {{m}}u * {{m}}u; k = k + 1u) {
            a[k] = f32(x[b * {{m}}u * {{m}}u + k]);
        }
        var d: f32 = 1.0;
        for (var col: u32 = 0u; col < {{m}}u; col = col + 1u) {
            var p = col;
            var best = abs(a[col * {{m}}u + col]);
            for (var r: u32 = col + 1u; r < {{m}}u; r = r + 1u) {
                let v = abs(a[r * {{m}}u + col]);
                if ((bitcast<u32>(v) > 0x7f800000u) || v >= best) {
                    best = v;
                    p = r;
                }
            }
            if (a[p * {{m}}u + col] == 0.0) {
                d = 0.0;
                break;
            }
            if (p != col) {
                for (var k: u32 = 0u; k < {{m}}u; k = k + 1u) {
                    let t = a[p * {{m}}u + k];
                    a[p * {{m}}u + k] = a[col * {{m}}u + k];
                    a[col * {{m}}u + k] = t;
                }
                d = -d;
            }
            let piv = a[col * {{m}}u + col];
            d = d * piv;
            for (var r: u32 = col + 1u; r < {{m}}u; r = r + 1u) {
                let f = a[r * {{m}}u + col] / piv;
                if (f != 0.0) {
                    for (var k: u32 = col; k < {{m}}u; k = k + 1u) {
                        a[r * {{m}}u + k] = a[r * {{m}}u + k] - f * a[col * {{m}}u + k];
                    }
                }
            }
        }
        out[b] = {{store}};
    }
}
