{{enable}}// RoiAlign (mode {{mode}}, {{ctm}}, sampling_ratio {{ratio}}, spatial_scale {{scale}}):
// one invocation per output element (region, channel, bin row, bin column) in a
// grid-stride loop, sampling its bin bilinearly on a grid of samples. The region's
// batch index is read on the device: one outside the batch raises the node's code in
// gopt_err and reads batch 0.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read> rois: array<{{rt}}>;
@group(0) @binding(2) var<storage, read> bidx: array<{{bt}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{t}}>;
@group(0) @binding(4) var<storage, read_write> gopt_err: atomic<u32>;

// The four weighted corners of the bilinear sample at (y0, x0) of the plane at
// `base`: all zero more than a pixel outside the plane.
fn ra_corners(base: u32, y0: f32, x0: f32) -> vec4<f32> {
    if (y0 < -1.0 || y0 > {{h}}.0 || x0 < -1.0 || x0 > {{w}}.0) {
        return vec4<f32>(0.0);
    }
    var y = max(y0, 0.0);
    var xx = max(x0, 0.0);
    var yl = u32(y);
    var xl = u32(xx);
    var yh = yl + 1u;
    var xh = xl + 1u;
    if (yl >= {{h}}u - 1u) {
        yl = {{h}}u - 1u;
        yh = yl;
        y = f32(yl);
    }
    if (xl >= {{w}}u - 1u) {
        xl = {{w}}u - 1u;
        xh = xl;
        xx = f32(xl);
    }
    let ly = y - f32(yl);
    let lx = xx - f32(xl);
    let hy = 1.0 - ly;
    let hx = 1.0 - lx;
    return vec4<f32>(
        hy * hx * f32(x[base + yl * {{w}}u + xl]),
        hy * lx * f32(x[base + yl * {{w}}u + xh]),
        ly * hx * f32(x[base + yh * {{w}}u + xl]),
        ly * lx * f32(x[base + yh * {{w}}u + xh]),
    );
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let px = i % {{pw}}u;
        let py = (i / {{pw}}u) % {{ph}}u;
        let rc = i / {{bins}}u;
        let ch = rc % {{c}}u;
        let ri = rc / {{c}}u;
{{read}}        let rb = ri * 4u;
        let sw = f32(rois[rb]) * {{scalef}} - {{off}};
        let sh = f32(rois[rb + 1u]) * {{scalef}} - {{off}};
        var rw = f32(rois[rb + 2u]) * {{scalef}} - {{off}} - sw;
        var rh = f32(rois[rb + 3u]) * {{scalef}} - {{off}} - sh;
{{least}}        let bh = rh / {{ph}}.0;
        let bw = rw / {{pw}}.0;
{{grid}}        let base = (b * {{c}}u + ch) * {{plane}}u;
        var acc: f32 = {{init}};
        for (var iy: u32 = 0u; iy < gh; iy = iy + 1u) {
            let yy = sh + f32(py) * bh + (f32(iy) + 0.5) * bh / f32(gh);
            for (var ix: u32 = 0u; ix < gw; ix = ix + 1u) {
                let xx = sw + f32(px) * bw + (f32(ix) + 0.5) * bw / f32(gw);
                let v = ra_corners(base, yy, xx);
{{each}}            }
        }
{{finish}}        out[i] = {{t}}(acc);
    }
}
