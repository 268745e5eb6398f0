// Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd extension.
fn gopt_erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

// tanh to about 1 ulp (Cephes' tanhf: a polynomial below 0.625, where a built-in
// that goes through exp cancels; 1 - 2 / (e^2|x| + 1) above).
fn gopt_tanh(x: f32) -> f32 {
    let a = abs(x);
    if (a < 0.625) {
        let z = x * x;
        return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
    }
    let t = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    return select(t, -t, x < 0.0);
}

fn gopt_sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// The natural logarithm to about 1 ulp (some implementations' built-in log has an
// absolute error near 1e-6 around 1): x = m 2^e with m in [sqrt(1/2), sqrt(2)),
// log(m) = 2 atanh((m - 1) / (m + 1)) by its series, e ln 2 in two parts. Zero,
// subnormals, negatives, infinities and NaN go to the built-in.
fn gopt_log(x: f32) -> f32 {
    if (!(x >= 1.17549435e-38) || x > 3.40282347e38) {
        return log(x);
    }
    let f = frexp(x);
    var m = f.fract;
    var e = f32(f.exp);
    if (m < 0.70710678) {
        m = m * 2.0;
        e = e - 1.0;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let p = s * (2.0 + z * (0.6666666667 + z * (0.4 + z * (0.2857142857 + z * (0.2222222222 + z * 0.1818181818)))));
    return (p + e * -2.12194440e-4) + e * 0.693359375;
}

// log(1 + x) accurate for small x (Goldberg: the rounding of 1 + x cancels out).
fn gopt_log1p(x: f32) -> f32 {
    let u = 1.0 + x;
    if (u == 1.0) {
        return x;
    }
    return gopt_log(u) * (x / (u - 1.0));
}

// log(1 + e^x) without overflow.
fn gopt_softplus(x: f32) -> f32 {
    return max(x, 0.0) + gopt_log1p(exp(-abs(x)));
}

// The remainder with the dividend's sign (C's fmod): a - q * b with the product's
// rounding error recovered exactly (Dekker's two-product; fma is not always fused),
// then corrected by one divisor where the f32 quotient rounded across an integer.
// A finite dividend over an infinite divisor is the dividend itself, and a zero
// remainder has the dividend's sign (as C's fmod).
fn gopt_fmod(a: f32, b: f32) -> f32 {
    if ((bitcast<u32>(b) & 0x7fffffffu) == 0x7f800000u && (bitcast<u32>(a) & 0x7fffffffu) < 0x7f800000u) {
        return a;
    }
    let q = trunc(a / b);
    let p = q * b;
    let cq = 4097.0 * q;
    let qh = cq - (cq - q);
    let ql = q - qh;
    let cb = 4097.0 * b;
    let bh = cb - (cb - b);
    let bl = b - bh;
    let e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
    var r = (a - p) - e;
    let m = abs(b);
    if (r != 0.0 && (r < 0.0) != (a < 0.0)) {
        r = r + select(-m, m, a >= 0.0);
    }
    if (abs(r) >= m) {
        r = r - select(-m, m, a >= 0.0);
    }
    if (r == 0.0) {
        return bitcast<f32>(bitcast<u32>(a) & 0x80000000u);
    }
    return r;
}

// The remainder with the divisor's sign (numpy's mod; a zero remainder has the
// divisor's sign, a finite dividend over an infinite divisor of the other sign is
// that infinity).
fn gopt_mod_floor(a: f32, b: f32) -> f32 {
    let r = gopt_fmod(a, b);
    if (r == 0.0 && b != 0.0) {
        return bitcast<f32>(bitcast<u32>(b) & 0x80000000u);
    }
    return select(r, r + b, r != 0.0 && (r < 0.0) != (b < 0.0));
}

// x * tanh(softplus(x)) as x * n / (n + 2) with n = e^x (e^x + 2): no cancellation
// in 1 + e^x for negative x; from x = 20 on, tanh(softplus(x)) is 1 in f32.
fn gopt_mish(x: f32) -> f32 {
    if (x >= 20.0) {
        return x;
    }
    let e = exp(x);
    let n = e * (e + 2.0);
    return x * n / (n + 2.0);
}

fn gopt_imod_floor(a: i32, b: i32) -> i32 {
    let r = a % b;
    return select(r, r + b, r != 0i && (r < 0i) != (b < 0i));
}

// 64-bit integers as vec2<u32> (low word first), two's complement.
fn gopt_neg64(v: vec2<u32>) -> vec2<u32> {
    let lo = ~v.x + 1u;
    return vec2<u32>(lo, ~v.y + select(0u, 1u, lo == 0u));
}

fn gopt_add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn gopt_sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// The full 64-bit product of two 32-bit words.
fn gopt_mulw(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

fn gopt_mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = gopt_mulw(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn gopt_lt_i64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn gopt_lt_u64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

// v >> s (logical), s in 0..63.
fn gopt_shr64(v: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return v;
    }
    if (s >= 32u) {
        return vec2<u32>(v.y >> (s - 32u), 0u);
    }
    return vec2<u32>((v.x >> s) | (v.y << (32u - s)), v.y >> s);
}

// v << s, s in 0..63.
fn gopt_shl64(v: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) {
        return v;
    }
    if (s >= 32u) {
        return vec2<u32>(0u, v.x << (s - 32u));
    }
    return vec2<u32>(v.x << s, (v.y << s) | (v.x >> (32u - s)));
}

// The number of significant bits of v (0 for zero).
fn gopt_bits64(v: vec2<u32>) -> u32 {
    if (v.y != 0u) {
        return 64u - countLeadingZeros(v.y);
    }
    return 32u - countLeadingZeros(v.x);
}

// v / 2^s rounded to nearest, ties to even (s in 1..63).
fn gopt_rnd64(v: vec2<u32>, s: u32) -> vec2<u32> {
    let q = gopt_shr64(v, s);
    let rem = gopt_sub64(v, gopt_shl64(q, s));
    let half = gopt_shl64(vec2<u32>(1u, 0u), s - 1u);
    let up = gopt_lt_u64(half, rem) || (all(rem == half) && (q.x & 1u) == 1u);
    return select(q, gopt_add64(q, vec2<u32>(1u, 0u)), up);
}

// An unsigned 64-bit magnitude as f32, rounded first to f64 then to f32 (what the
// reference's conversion through f64 does).
fn gopt_mag_to_f32(m: vec2<u32>) -> f32 {
    var q = m;
    var e = 0u;
    var n = gopt_bits64(q);
    if (n > 53u) {
        q = gopt_rnd64(q, n - 53u);
        e = n - 53u;
        n = gopt_bits64(q);
    }
    if (n > 24u) {
        q = gopt_rnd64(q, n - 24u);
        e = e + n - 24u;
    }
    return ldexp(f32(q.x), i32(e));
}

fn gopt_i64_to_f32(v: vec2<u32>) -> f32 {
    let neg = bitcast<i32>(v.y) < 0i;
    let r = gopt_mag_to_f32(select(v, gopt_neg64(v), neg));
    return select(r, -r, neg);
}

fn gopt_u64_to_f32(v: vec2<u32>) -> f32 {
    return gopt_mag_to_f32(v);
}

// A float truncated toward zero as a 64-bit two's complement integer, wrapped to 64
// bits (NaN is 0; magnitudes from 2^127 saturate at i128's bounds first, as the
// reference's conversion through i128 does).
fn gopt_f2i(v: f32) -> vec2<u32> {
    let b = bitcast<u32>(v);
    let e = i32((b >> 23u) & 0xffu);
    let neg = (b >> 31u) != 0u;
    if (e == 255i && (b & 0x7fffffu) != 0u) {
        return vec2<u32>(0u, 0u);
    }
    if (e >= 254i) {
        return select(vec2<u32>(0xffffffffu, 0xffffffffu), vec2<u32>(0u, 0u), neg);
    }
    if (e < 127i) {
        return vec2<u32>(0u, 0u);
    }
    let m = (b & 0x7fffffu) | 0x800000u;
    let s = e - 150i;
    var r = vec2<u32>(0u, 0u);
    if (s <= 0i) {
        r = vec2<u32>(m >> u32(-s), 0u);
    } else if (s < 32i) {
        r = vec2<u32>(m << u32(s), m >> u32(32i - s));
    } else if (s < 64i) {
        r = vec2<u32>(0u, m << u32(s - 32i));
    }
    return select(r, gopt_neg64(r), neg);
}

// atan with Cephes' range reduction and polynomial (|error| about 1e-7; some
// implementations' built-in inverse trigonometry is far coarser).
fn gopt_atan(x: f32) -> f32 {
    var a = abs(x);
    var y = 0.0;
    if (a > 2.414213562373095) {
        y = 1.5707963267948966;
        a = -1.0 / a;
    } else if (a > 0.4142135623730950) {
        y = 0.7853981633974483;
        a = (a - 1.0) / (a + 1.0);
    }
    let z = a * a;
    y = y + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * a + a);
    return select(y, -y, x < 0.0);
}

fn gopt_asin(x: f32) -> f32 {
    return gopt_atan(x / sqrt((1.0 - x) * (1.0 + x)));
}

fn gopt_acos(x: f32) -> f32 {
    return 2.0 * gopt_atan(sqrt((1.0 - x) / (1.0 + x)));
}

fn gopt_div(a: f32, b: f32) -> f32 {
    // a / b correctly rounded. WGSL allows `/` 2.5 ULP (NVIDIA's Vulkan driver takes
    // it), so where a quotient must land exactly (an align_corners coordinate 3 * 7 / 7
    // is 3, not 2.9999998 that floors to 2) one fma step restores IEEE division.
    let q = a / b;
    let finite = ((bitcast<u32>(q) & 0x7f800000u) != 0x7f800000u)
        && ((bitcast<u32>(b) & 0x7f800000u) != 0x7f800000u) && b != 0.0;
    if (!finite) {
        return q;
    }
    let r = fma(-q, b, a);
    return fma(r, 1.0 / b, q);
}

fn gopt_isnan(x: f32) -> bool {
    // On the bits: WGSL lets an implementation assume no NaN in comparisons.
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn gopt_fmax(a: f32, b: f32) -> f32 {
    // numpy's maximum: NaN if either is NaN (WGSL's max leaves that undefined).
    if (gopt_isnan(a) || gopt_isnan(b)) {
        return bitcast<f32>(0x7fc00000u);
    }
    return max(a, b);
}

fn gopt_fmin(a: f32, b: f32) -> f32 {
    // numpy's minimum: NaN if either is NaN.
    if (gopt_isnan(a) || gopt_isnan(b)) {
        return bitcast<f32>(0x7fc00000u);
    }
    return min(a, b);
}

fn gopt_pow(b: f32, e: f32) -> f32 {
    // numpy's power (WGSL's pow is undefined for bases <= 0): x**0 = 1 and 1**y = 1
    // (NaN included), 0**negative = inf, a negative base needs an integer exponent
    // (else NaN) and an odd one keeps the sign, (-1)**±inf = 1.
    if (e == 0.0 || b == 1.0) {
        return 1.0;
    }
    if (gopt_isnan(b) || gopt_isnan(e)) {
        return bitcast<f32>(0x7fc00000u);
    }
    let a = abs(b);
    let odd = e == floor(e) && abs(e % 2.0) == 1.0;
    let neg = (bitcast<u32>(b) & 0x80000000u) != 0u;
    var r: f32;
    if (a == 0.0) {
        r = select(0.0, bitcast<f32>(0x7f800000u), e < 0.0);
    } else if (a == 1.0) {
        r = 1.0;
    } else {
        r = pow(a, e);
    }
    if (neg) {
        if (a != 0.0 && e != floor(e)) {
            return bitcast<f32>(0x7fc00000u);
        }
        if (odd) {
            r = -r;
        }
    }
    return r;
}
