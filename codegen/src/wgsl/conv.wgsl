{{enable}}// {{what}} (implicit GEMM): {{desc}}. Per group (z), Y[M/g, N*out] = W[M/g, K] x
// im2col(X)[K, N*out] with K = C/g * taps ({{korder}}); a workgroup computes a
// {{bm}}x{{bn}} tile (looping over column tiles past the dispatch), each invocation 4x4
// of it in f32 registers; K advances 16 at a time through workgroup memory (W rows and
// the im2col rows gathered on the fly, zeros outside the tensors), the next K tile
// loaded into registers while this one is multiplied (all unrolled: no private
// arrays, which some drivers put in local memory); fused epilogue, one rounding.
{{bindings}}
const BM: u32 = {{bm}}u;
const BN: u32 = {{bn}}u;
const BK: u32 = 16u;
const THREADS: u32 = {{threads}}u;
const TX: u32 = {{bn}}u / 4u;
const RY: u32 = {{bm}}u / 4u;
const K: u32 = {{k}}u;
const MG: u32 = {{mg}}u;
const NCOL: u32 = {{ncol}}u;
const TILES_N: u32 = {{tiles_n}}u;
const SA: u32 = {{bm}}u + 4u;
const SB: u32 = {{bn}}u + 4u;
var<workgroup> As: array<f32, {{as_len}}>;
var<workgroup> Bs: array<f32, {{bs_len}}>;
{{helpers}}
@compute @workgroup_size({{threads}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.z;
    let m0 = wid.y * BM;
{{thread_map}}    for (var ct: u32 = wid.x; ct < TILES_N; ct = ct + nwg.x) {
        let col0 = ct * BN;
{{columns}}{{decls}}        {
            let kl = 0u;
{{load}}        }
        for (var k0: u32 = 0u; k0 < K; k0 = k0 + BK) {
{{store}}            workgroupBarrier();
            if (k0 + BK < K) {
                let kl = k0 + BK;
{{load}}            }
            for (var kk: u32 = 0u; kk < BK; kk = kk + 1u) {
{{fma}}            }
            workgroupBarrier();
        }
{{epilogue}}    }
}
