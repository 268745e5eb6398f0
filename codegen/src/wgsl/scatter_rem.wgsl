// The Euclidean remainder of a signed 64-bit integer (vec2<u32>, low word first) by
// m in 1..2^31, exactly: its magnitude's bits folded in from the top (r < m keeps
// 2r + 1 in u32), negated back for a negative value.
fn gopt_rem_euclid64(v: vec2<u32>, m: u32) -> u32 {
    let neg = bitcast<i32>(v.y) < 0i;
    let a = select(v, gopt_neg64(v), neg);
    var r = 0u;
    for (var b = 63u; b < 64u; b = b - 1u) {
        var bit = 0u;
        if (b >= 32u) {
            bit = (a.y >> (b - 32u)) & 1u;
        } else {
            bit = (a.x >> b) & 1u;
        }
        r = r * 2u + bit;
        if (r >= m) {
            r = r - m;
        }
    }
    return select(r, (m - r) % m, neg);
}
