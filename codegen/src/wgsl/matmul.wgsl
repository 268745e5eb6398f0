{{enable}}// {{what}}: y = {{formula}}, a register-tiled GEMM ({{desc}}).
// {{threads}} invocations per workgroup compute a {{bm}}x{{bn}} output tile (looping over
// tiles past the dispatch); each invocation a {{tm}}x{{tn}} block in f32 registers: rows
// ty*4 + 4*ny*i, columns tx*4 + 4*{{nx}}*j, four at a time, by outer products. K advances {{bk}}
// at a time through workgroup memory (A as [K][BM], B as [K][BN], f32, vec4 reads), the
// next K slice loaded into registers while this one is multiplied. Everything inside
// the K loop is unrolled with named registers (no private arrays, which some drivers
// put in local memory); epilogue per output, one rounding at the store.
{{bindings}}
const M: u32 = {{m}}u;
const N: u32 = {{n}}u;
const K: u32 = {{k}}u;
const BM: u32 = {{bm}}u;
const BN: u32 = {{bn}}u;
const BK: u32 = {{bk}}u;
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
    let tx = lid % {{nx}}u;
    let ty = lid / {{nx}}u;
    for (var mt: u32 = wid.y; mt < TILES_M; mt = mt + nwg.y) {
    for (var nt: u32 = wid.x; nt < TILES_N; nt = nt + nwg.x) {
        let m0 = mt * BM;
        let n0 = nt * BN;
{{decls}}        {
            let kl = 0u;
{{load}}        }
        for (var k0: u32 = 0u; k0 < K; k0 = k0 + BK) {
{{stage}}            workgroupBarrier();
            if (k0 + BK < K) {
                let kl = k0 + BK;
{{load}}            }
            for (var kk: u32 = 0u; kk < BK; kk = kk + 1u) {
{{fma}}            }
            workgroupBarrier();
        }
{{out}}    }
    }
}
