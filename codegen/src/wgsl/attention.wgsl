{{enable}}// {{what}} ({{dtype}} data, fp32 math): flash attention, one workgroup of T invocations per
// (tile of BM query rows, query head, batch), TPR invocations per query row. Q is staged once,
// then K and V take turns in one workgroup buffer, BN keys at a time, as fp32 vec4 rows of LDV
// (the head of D zero-padded, odd to spread banks). Each invocation scores every TPR-th key of
// its row and accumulates every TPR-th vec4 of the head; the row's max is combined through
// workgroup memory (online softmax, fp32), O is divided by the sum and rounded once at the
// store. Masked keys never enter max or sum: a row whose keys are all masked gives zeros.
{{bindings}}
{{consts}}const CAUSAL: bool = {{causal}};
const NEG: f32 = -3.4028235e38;

var<workgroup> qs: array<vec4<f32>, BM * LDV>;
var<workgroup> kv: array<vec4<f32>, BN * LDV>;
var<workgroup> pp: array<f32, BM * BN>;
var<workgroup> red: array<f32, T>;
{{loaders}}
@compute @workgroup_size(T)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q0 = wid.x * BM;
    let h = wid.y;
    let b = wid.z;
    let kvh = h / GROUP;
    let qbase = b * Q_SB + h * Q_SH;
    let kbase = b * K_SB + kvh * K_SH;
    let r = lid / TPR;
    let qd = lid % TPR;
    let i = q0 + r;
{{mask_base}}    for (var x: u32 = lid; x < BM * LDV; x = x + T) {
        let rr = x / LDV;
        let c = x % LDV;
        var val = vec4<f32>(0.0);
        if (q0 + rr < SQ && c < D4) {
            val = load_q(qbase + (q0 + rr) * Q_SI, c);
        }
        qs[x] = val;
    }
    var mrun: f32 = NEG;
    var lrun: f32 = 0.0;
{{acc_decl}}    let kv_end = select(SKV, min(q0 + BM, min(SQ, SKV)), CAUSAL);
    for (var n0: u32 = 0u; n0 < kv_end; n0 = n0 + BN) {
        workgroupBarrier();
        for (var x: u32 = lid; x < BN * LDV; x = x + T) {
            let rr = x / LDV;
            let c = x % LDV;
            var val = vec4<f32>(0.0);
            if (n0 + rr < SKV && c < D4) {
                val = load_k(kbase + (n0 + rr) * K_SI, c);
            }
            kv[x] = val;
        }
        workgroupBarrier();
{{s_decl}}        for (var d: u32 = 0u; d < D4; d = d + 1u) {
            let qv = qs[r * LDV + d];
{{s_dot}}        }
        var lm: f32 = NEG;
{{s_post}}        red[lid] = lm;
        workgroupBarrier();
        // Every invocation is done with K: V takes its place.
        for (var x: u32 = lid; x < BN * LDV; x = x + T) {
            let rr = x / LDV;
            let c = x % LDV;
            var val = vec4<f32>(0.0);
            if (n0 + rr < SKV && c < D4) {
                val = load_v(kbase + (n0 + rr) * K_SI, c);
            }
            kv[x] = val;
        }
        var mx: f32 = mrun;
        for (var t: u32 = 0u; t < TPR; t = t + 1u) {
            mx = max(mx, red[r * TPR + t]);
        }
        let alpha = exp(mrun - mx);
        mrun = mx;
        lrun = lrun * alpha;
{{p_store}}        workgroupBarrier();
{{acc_scale}}        for (var c: u32 = 0u; c < BN; c = c + 1u) {
            let p = pp[r * BN + c];
{{acc_fma}}        }
    }
    workgroupBarrier();
    red[lid] = lrun;
    workgroupBarrier();
    var l: f32 = 0.0;
    for (var t: u32 = 0u; t < TPR; t = t + 1u) {
        l = l + red[r * TPR + t];
    }
    let inv = select(0.0, 1.0 / l, l > 0.0);
    if (i < SQ) {
        let obase = b * Q_SB + h * Q_SH + i * Q_SI;
{{stores}}    }
}
