{{enable}}// {{what}} (implicit GEMM): {{desc}}. Per group (z), Y[M/g, N*out] = W[M/g, K] x
// im2col(X)[K, N*out] with K = C/g * taps ({{korder}}); {{threads}} invocations per
// workgroup compute a {{bm}}x{{bn}} tile (looping over tiles past the dispatch), each a
// {{tm}}x{{tn}} block in f32 registers (rows ty*4 + 4*ny*i, columns tx*4 + 4*{{nx}}*j) by
// vec4 outer products. K advances {{bk}} at a time through workgroup memory (W
// transposed to [K][BM], the im2col rows gathered on the fly as [K][BN], zeros outside
// the tensors), the next K slice loaded into registers while this one is multiplied
// (all unrolled: no private arrays, which some drivers put in local memory); fused
// epilogue per output, one rounding at the store.
{{bindings}}
const BM: u32 = {{bm}}u;
const BN: u32 = {{bn}}u;
const BK: u32 = {{bk}}u;
const K: u32 = {{k}}u;
const MG: u32 = {{mg}}u;
const NCOL: u32 = {{ncol}}u;
const P: u32 = {{p}}u;
const SA: u32 = {{sa}}u;
const SB: u32 = {{sb}}u;
const TILES_M: u32 = {{tiles_m}}u;
const TILES_N: u32 = {{tiles_n}}u;
var<workgroup> As: array<vec4<f32>, {{as_len}}>;
var<workgroup> Bs: array<vec4<f32>, {{bs_len}}>;
{{helpers}}
fn put(g: u32, row: u32, col: u32, acc_: f32) {
    if (row < MG && col < NCOL) {
        let oc = g * MG + row;
        let n = col / P;
        let p = col % P;
{{epilogue}}    }
}

@compute @workgroup_size({{threads}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let batch = wid.z;
    let g = batch;
    let wbase = g * MG * K;
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
