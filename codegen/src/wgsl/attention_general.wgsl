{{enable}}// {{what}} ({{dtype}} data, fp32 math), the general kernel: one workgroup of WG invocations per
// (query row, query head, batch) scores every key (the KV cache's, then the new ones) in three
// passes over the keys (max, sum, weighted sum of V), following the interpreter step by step,
// its roundings to the data's type (`rnd`) and the softmax's (`smr`) included:
// raw = (q·√s)·(k·√s), capped = softcap(raw), x = capped + bias (mask, causal, window and
// padding as -inf), p = exp(x - max) / sum over the keys whose bias is not -inf; a row whose
// keys are all masked gives zeros. A bf16 softmax sums one key at a time, rounding each
// partial sum (SM_SEQ), as the reference does. The workgroups also copy the cache and the new keys and
// values into present_key/present_value (grid-stride) and write qk_matmul_output.
{{bindings}}
{{consts}}const WG: u32 = 64u;
const NEG: f32 = -3.4028235e38;
const LIM: i32 = 1073741824i;

var<workgroup> red: array<f32, WG>;
var<workgroup> pw: array<f32, WG>;

// Rounds to the data's type.
fn rnd(x: f32) -> f32 {
{{rnd}}}

// Rounds to the softmax precision's type.
fn smr(x: f32) -> f32 {
{{smr}}}

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

fn kraw(b: u32, kh: u32, j: u32, c: u32) -> {{t}} {
{{past_k}}    return k[K_OFF + b * K_SB + kh * K_SH + (j - PAST) * K_SI + c];
}

fn vraw(b: u32, kh: u32, j: u32, c: u32) -> {{t}} {
{{past_v}}    return v[V_OFF + b * V_SB + kh * V_SH + (j - PAST) * V_SI + c];
}

// Keys at or past this are padding (nonpad_kv_seqlen, clamped to +-2^30).
fn kv_len(b: u32) -> i32 {
{{kv_len}}}

// The position of query row 0 among the keys.
fn offset(b: u32) -> i32 {
{{offset}}}

fn mask_at(b: u32, h: u32, i: u32, j: u32) -> f32 {
{{mask_at}}}

fn bias(b: u32, h: u32, i: u32, j: u32, off: i32, n: i32) -> f32 {
    var x = mask_at(b, h, i, j);
    let pos = off + i32(i);
    let jj = i32(j);
    if (CAUSAL && jj > pos) { x = neg_inf(); }
    if (LEFT >= 0i && pos - jj > LEFT) { x = neg_inf(); }
    if (RIGHT >= 0i && jj - pos > RIGHT) { x = neg_inf(); }
    if (jj >= n) { x = neg_inf(); }
    return x;
}

fn raw_score(qb: u32, b: u32, kh: u32, j: u32) -> f32 {
    let sqs = rnd(SQS);
    var s: f32 = 0.0;
    for (var c: u32 = 0u; c < DK; c = c + 1u) {
        s = s + rnd(f32(q[qb + c]) * sqs) * rnd(f32(kraw(b, kh, j, c)) * sqs);
    }
    return rnd(s);
}

fn capped(r: f32) -> f32 {
    if (CAP > 0.0) {
        return rnd(rnd(tanh(clamp(rnd(r / CAP), -20.0, 20.0))) * CAP);
    }
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = wid.x;
    let h = wid.y;
    let b = wid.z;
    let kh = h / GROUP;
    let qb = Q_OFF + b * Q_SB + h * Q_SH + i * Q_SI;
    let off = offset(b);
    let n = kv_len(b);
    let flat = ((b * HQ + h) * SQ + i) * WG + t;
{{present}}
    // Pass 1: the max over the keys not masked.
    var m = neg_inf();
    for (var j: u32 = t; j < TOTAL; j = j + WG) {
        let bj = bias(b, h, i, j, off, n);
        if (bj >= NEG) { m = max(m, smr(rnd(capped(raw_score(qb, b, kh, j)) + bj))); }
    }
    red[t] = m;
    workgroupBarrier();
    for (var s: u32 = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) { red[t] = max(red[t], red[t + s]); }
        workgroupBarrier();
    }
    let mx = red[0];
    workgroupBarrier();
    let live = mx >= NEG;

    // Pass 2: the sum of exp(x - max) (one invocation, key by key, when SM_SEQ).
    var l: f32 = 0.0;
    if (!SM_SEQ || t == 0u) {
        for (var j: u32 = select(t, 0u, SM_SEQ); j < TOTAL; j = j + select(WG, 1u, SM_SEQ)) {
            let bj = bias(b, h, i, j, off, n);
            if (bj >= NEG) {
                let x = smr(rnd(capped(raw_score(qb, b, kh, j)) + bj));
                let ex = smr(exp(smr(x - mx)));
                l = select(l + ex, smr(l + ex), SM_SEQ);
            }
        }
    }
    red[t] = l;
    workgroupBarrier();
    for (var s: u32 = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) { red[t] = red[t] + red[t + s]; }
        workgroupBarrier();
    }
    var sum = smr(red[0]);
    if (sum == 0.0) { sum = 1.0; }

    // Pass 3: WG keys at a time, their probabilities through `pw`, times V.
    var acc: array<f32, E>;
    for (var e: u32 = 0u; e < E; e = e + 1u) { acc[e] = 0.0; }
    for (var c0: u32 = 0u; c0 < TOTAL; c0 = c0 + WG) {
        let j = c0 + t;
        var p: f32 = 0.0;
        if (j < TOTAL) {
            let raw = raw_score(qb, b, kh, j);
            let cp = capped(raw);
            let bj = bias(b, h, i, j, off, n);
            let x = rnd(cp + bj);
            if (live && bj >= NEG) { p = rnd(smr(smr(exp(smr(smr(x) - mx))) / sum)); }
{{qk_store}}        }
        pw[t] = p;
        workgroupBarrier();
        let cnt = min(WG, TOTAL - c0);
        for (var e: u32 = 0u; e < E; e = e + 1u) {
            let col = t + e * WG;
            if (col < DV) {
                var s = acc[e];
                for (var u: u32 = 0u; u < cnt; u = u + 1u) {
                    s = s + pw[u] * f32(vraw(b, kh, c0 + u, col));
                }
                acc[e] = s;
            }
        }
        workgroupBarrier();
    }
    let ob = b * O_SB + h * O_SH + i * O_SI;
    for (var e: u32 = 0u; e < E; e = e + 1u) {
        let col = t + e * WG;
        if (col < DV) { y[ob + col] = {{t}}(acc[e]); }
    }
}
