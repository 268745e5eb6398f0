{{enable}}// DeformConv (2-D): one invocation per output element (grid-stride) sums, over its
// group's input channels and the kernel taps, the weight times the input sampled
// bilinearly at the tap's position plus its offset (corners outside the {{h}} x {{w}}
// image read zero), times the mask when there is one; f32, one rounding at the store.
{{bindings}}
fn pixel(xb: u32, r: i32, c: i32) -> f32 {
    if (r >= 0 && c >= 0 && r < {{h}} && c < {{w}}) {
        return f32(x[xb + u32(r * {{w}} + c)]);
    }
    return 0.0;
}

fn sample(xb: u32, y: f32, xx: f32) -> f32 {
    if (y <= -1.0 || y >= {{h}}.0 || xx <= -1.0 || xx >= {{w}}.0) {
        return 0.0;
    }
    let y0 = floor(y);
    let x0 = floor(xx);
    let ly = y - y0;
    let lx = xx - x0;
    let yi = i32(y0);
    let xi = i32(x0);
    return pixel(xb, yi, xi) * (1.0 - ly) * (1.0 - lx)
        + pixel(xb, yi, xi + 1) * (1.0 - ly) * lx
        + pixel(xb, yi + 1, xi) * ly * (1.0 - lx)
        + pixel(xb, yi + 1, xi + 1) * ly * lx;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
        var r: u32 = i;
        let ox = r % {{ow}}u; r = r / {{ow}}u;
        let oy = r % {{oh}}u; r = r / {{oh}}u;
        let m = r % {{m}}u;
        let n = r / {{m}}u;
        let grp = m / {{mg}}u;
        let q = oy * {{ow}}u + ox;
        var acc: f32 = 0.0;
        for (var cc: u32 = 0u; cc < {{cg}}u; cc = cc + 1u) {
            let ch = grp * {{cg}}u + cc;
            let xb = (n * {{c}}u + ch) * {{h}}u * {{w}}u;
            let ob = (n * {{og}}u + ch / {{cog}}u) * {{taps}}u;
            for (var ki: u32 = 0u; ki < {{kh}}u; ki = ki + 1u) {
                for (var kj: u32 = 0u; kj < {{kw}}u; kj = kj + 1u) {
                    let tap = ki * {{kw}}u + kj;
                    let dy = f32(off[((ob + tap) * 2u) * {{p}}u + q]);
                    let dx = f32(off[((ob + tap) * 2u + 1u) * {{p}}u + q]);
                    let y = f32(i32(oy) * {{sh}} + i32(ki) * {{dh}} - {{ph}}) + dy;
                    let xx = f32(i32(ox) * {{sw}} + i32(kj) * {{dw}} - {{pw}}) + dx;
                    var v = sample(xb, y, xx);
{{mask}}                    acc = acc + f32(w[((m * {{cg}}u + cc) * {{kh}}u + ki) * {{kw}}u + kj]) * v;
                }
            }
        }
        out[i] = {{t}}(acc{{bias}});
    }
}
