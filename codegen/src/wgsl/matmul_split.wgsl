{{enable}}// {{what}}: y = {{formula}}, a register-tiled split-K GEMM ({{desc}}).
// {{threads}} invocations per workgroup compute a {{bm}}x{{bn}} output tile (looping over
// tiles past the dispatch) as {{s}} groups of {{group}}; each invocation a 4x4 block in f32
// registers (rows ty*4, columns tx*4 of its group's tile) by outer products. K advances
// {{kb}} at a time through workgroup memory (A as [K][BM], B as [K][BN], f32, vec4 reads),
// loaded by all invocations, the next block into registers while this one is multiplied;
// group s multiplies slices s*{{bk}} .. s*{{bk}}+{{bk}} of each block. The groups' partial sums
// are then reduced through workgroup memory into group 0, which runs the epilogue per
// output, one rounding at the store. Everything inside the K loop is unrolled with
// named registers (no private arrays, which some drivers put in local memory).
{{bindings}}
const M: u32 = {{m}}u;
const N: u32 = {{n}}u;
const K: u32 = {{k}}u;
const BM: u32 = {{bm}}u;
const BN: u32 = {{bn}}u;
const BK: u32 = {{bk}}u;
const KB: u32 = {{kb}}u;
const SA: u32 = {{sa}}u;
const SB: u32 = {{sb}}u;
const TILES_M: u32 = {{tiles_m}}u;
const TILES_N: u32 = {{tiles_n}}u;
var<workgroup> As: array<vec4<f32>, {{as_len}}>;
var<workgroup> Bs: array<vec4<f32>, {{bs_len}}>;

fn gopt_erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

fn gopt_sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

fn put(batch: u32, row: u32, col: u32, acc: f32) {
    if (row < M && col < N) {
        let o = batch * {{stride_d}}u + row * N + col;
        var v: f32 = acc * {{alpha}};
{{epilogue}}        y[o] = {{store}};
    }
}

@compute @workgroup_size({{threads}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let batch = wid.z;
    let abase = batch * {{stride_a}}u;
    let bbase = batch * {{stride_b}}u;
    let s = lid / {{group}}u;
    let lg = lid % {{group}}u;
    let tx = lg % {{nx}}u;
    let ty = lg / {{nx}}u;
    let kb = s * BK;
    for (var mt: u32 = wid.y; mt < TILES_M; mt = mt + nwg.y) {
    for (var nt: u32 = wid.x; nt < TILES_N; nt = nt + nwg.x) {
        let m0 = mt * BM;
        let n0 = nt * BN;
{{decls}}        {
            let kl = 0u;
{{load}}        }
        for (var k0: u32 = 0u; k0 < K; k0 = k0 + KB) {
{{stage}}            workgroupBarrier();
            if (k0 + KB < K) {
                let kl = k0 + KB;
{{load}}            }
            if (k0 + kb < K) {
                for (var j: u32 = 0u; j < BK; j = j + 1u) {
                    let kk = kb + j;
{{fma}}                }
            }
            workgroupBarrier();
        }
{{reduce}}        if (s == 0u) {
{{out}}        }
    }
    }
}
