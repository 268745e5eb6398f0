// rint(c * m + z), ties to even, saturated to [lo, hi], from the exact product:
// m = mm 2^-s with an integer mm below 2^24, so |c| mm is a 64-bit integer whose
// integer part q and fraction (against one half) decide the rounding. A NaN product
// (a NaN multiplier, or 0 times an infinite one) is 0, as the reference saturates NaN.
fn q_requant(c: i32, m: f32, z: i32, lo: i32, hi: i32) -> i32 {
    let mb = bitcast<u32>(m);
    let e = (mb >> 23u) & 0xffu;
    let neg = (c < 0i) != ((mb >> 31u) != 0u);
    let big = select(hi, lo, neg);
    if (e == 255u) {
        return select(big, 0i, (mb & 0x7fffffu) != 0u || c == 0i);
    }
    var mm = mb & 0x7fffffu;
    var s = 149i;
    if (e != 0u) {
        mm = mm | 0x800000u;
        s = 150i - i32(e);
    }
    let cu = bitcast<u32>(c);
    let p = gopt_mulw(select(cu, ~cu + 1u, c < 0i), mm);
    // q: the magnitude's integer part (below 2^20, else the result saturates); cmp:
    // its fraction against one half (-1, 0, 1); frac: whether it has one.
    var q = 0u;
    var cmp = -1i;
    var frac = false;
    if (s <= 0i) {
        if (p.y != 0u || (p.x != 0u && (s <= -20i || p.x >= (1u << u32(20i + s))))) {
            return big;
        }
        q = p.x << u32(-s);
    } else if (s >= 64i) {
        frac = p.x != 0u || p.y != 0u;
    } else {
        let qq = gopt_shr64(p, u32(s));
        if (qq.y != 0u || qq.x >= 0x100000u) {
            return big;
        }
        q = qq.x;
        let rem = gopt_sub64(p, gopt_shl64(qq, u32(s)));
        let half = gopt_shl64(vec2<u32>(1u, 0u), u32(s - 1i));
        frac = rem.x != 0u || rem.y != 0u;
        cmp = select(select(1i, 0i, all(rem == half)), -1i, gopt_lt_u64(rem, half));
    }
    let qi = i32(q);
    var r: i32;
    if (!neg) {
        r = z + qi + select(0i, 1i, cmp > 0i || (cmp == 0i && ((z + qi) & 1i) != 0i));
    } else if (!frac) {
        r = z - qi;
    } else {
        let base = z - qi - 1i;
        r = base + select(0i, 1i, cmp < 0i || (cmp == 0i && (base & 1i) != 0i));
    }
    return clamp(r, lo, hi);
}

