{{enable}}// Resize ({{what}}): one invocation per output element in a grid-stride loop. Each
// resampled axis maps the element's index to a source coordinate, places its taps
// around it and weighs them; the element is {{how}}.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{t}}>;

// The first of the n samples nearest x, ties to the smaller index (the reference's
// window on the edge-padded axis); its floor is clamped to +-2^24 (a coordinate that
// far out is extrapolated or clamped to the axis' end anyway).
fn first_tap(x: f32, n: i32) -> i32 {
    let pad = (n + 1) / 2;
    let xp = x + f32(pad);
    let p = floor(xp);
    let frac = xp - p;
    let h = n / 2;
    var off: i32;
    if (n % 2 == 0) {
        off = select(-h + 1, -h, frac == 0.0);
    } else {
        let b = -((n - 1) / 2);
        off = select(b + 1, b, frac <= 0.5);
    }
    return i32(clamp(p, -16777216.0, 16777216.0)) + off - pad;
}

// The cubic convolution kernel with coefficient a at distance t.
fn cubic(a: f32, t: f32) -> f32 {
    let d = abs(t);
    let d2 = d * d;
    let d3 = d2 * d;
    if (d <= 1.0) {
        return (a + 2.0) * d3 - (a + 3.0) * d2 + 1.0;
    }
    if (d < 2.0) {
        return a * d3 - 5.0 * a * d2 + 8.0 * a * d - 4.0 * a;
    }
    return 0.0;
}

// The four cubic weights of fractional position r (the reference's expressions).
fn cubic4(a: f32, r: f32) -> vec4<f32> {
    let q = 1.0 - r;
    return vec4<f32>(
        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
        ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
        ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a);
}

// v clamped to the dtype's finite range, NaN kept (the reference saturates so).
fn sat(v: f32) -> f32 {
    return select(select(v, {{max}}, v > {{max}}), -{{max}}, v < -{{max}});
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
{{decode}}{{axes}}{{body}}    }
}
