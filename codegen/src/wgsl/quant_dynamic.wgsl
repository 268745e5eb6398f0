{{enable}}// DynamicQuantizeLinear of {{n}} elements: one workgroup finds the range (0
// included, NaN skipped), reduced through workgroup memory, then quantizes every
// element to u8; invocation 0 writes the scale and the zero point.
@group(0) @binding(0) var<storage, read> x: array<{{xt}}>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<storage, read_write> y_scale: array<{{xt}}>;
@group(0) @binding(3) var<storage, read_write> y_zero: array<u32>;

var<workgroup> lo: array<f32, 256>;
var<workgroup> hi: array<f32, 256>;

{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    var mn = 0.0;
    var mx = 0.0;
    for (var i: u32 = t; i < {{n}}u; i = i + 256u) {
        let v = f32(x[i]);
        if (!gopt_isnan(v)) {
            mn = min(mn, v);
            mx = max(mx, v);
        }
    }
    lo[t] = mn;
    hi[t] = mx;
    workgroupBarrier();
    for (var h: u32 = 128u; h > 0u; h = h >> 1u) {
        if (t < h) {
            lo[t] = min(lo[t], lo[t + h]);
            hi[t] = max(hi[t], hi[t + h]);
        }
        workgroupBarrier();
    }
    let minx = lo[0];
    let maxx = hi[0];
    let scale = gopt_div(select(maxx - minx, 1.0, maxx == minx), 255.0);
    let zf = 0.0 - gopt_div(minx, scale);
    let zp = select(round(clamp(zf, 0.0, 255.0)), zf, gopt_isnan(zf));
    for (var i: u32 = t; i < {{n}}u; i = i + 256u) {
        let r = round(gopt_div(f32(x[i]), scale)) + zp;
        y[i] = select(u32(clamp(r, 0.0, 255.0)), 0u, gopt_isnan(r));
    }
    if (t == 0u) {
        y_scale[0] = {{xt}}(scale);
        y_zero[0] = select(u32(zp), 0u, gopt_isnan(zp));
    }
}
