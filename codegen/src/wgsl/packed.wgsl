{{enable}}// MatMulNBits ({{what}}): Y[m, n] = sum_k A[m, k] * W[n, k]{{bias_note}} over {{m}} x {{k}} by
// {{k}} x {{n}}, W[n, k] = (q[n, k] - zp[n, k / {{block}}]) * scale[n, k / {{block}}].
// One workgroup of 64 invocations per tile of {{rows}} rows x 4 columns; the invocations
// split K in runs of 8 weights (a run lies in one block: one scale and zero point per
// run and column), multiply them into every row of the tile in f32, and sum their
// partial results through workgroup memory. B is one byte per storage word.
{{bindings}}

const K: u32 = {{k}}u;
const N: u32 = {{n}}u;
const M: u32 = {{m}}u;
const BLOCK: u32 = {{block}}u;
const BLOCKS: u32 = {{blocks}}u;
// Bytes of one block.
const BLOB: u32 = {{blob}}u;
const BITS: u32 = {{bits}}u;
// Bytes of packed zero points per column.
const ZROW: u32 = {{zrow}}u;
const ROWS: u32 = {{rows}}u;
const TILES_N: u32 = {{tiles_n}}u;
const TILES: u32 = {{tiles}}u;
const WG: u32 = 64u;
const RUN: u32 = 8u;

var<workgroup> part: array<vec4<f32>, {{parts}}>;

// Eight consecutive values along K.
struct Run {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn zero_of(n: u32, blk: u32) -> f32 {
    return {{zero}};
}

fn bias_of(n: u32) -> f32 {
    return {{bias}};
}

// W[n, k0 .. k0 + 8], dequantized (k0 a multiple of 8).
fn weights(n: u32, k0: u32) -> Run {
    let blk = k0 / BLOCK;
    let s = f32(scales[n * BLOCKS + blk]);
    let z = zero_of(n, blk);
    let at = (n * BLOCKS + blk) * BLOB + (k0 % BLOCK) * BITS / 8u;
{{unpack}}
    return Run((q_lo - z) * s, (q_hi - z) * s);
}

// A[row, k0 .. k0 + 8], zero past K.
fn activations(row: u32, k0: u32) -> Run {
    let i = row * K + k0;
    if (k0 + RUN <= K) {
        return Run(
            vec4<f32>(f32(a[i]), f32(a[i + 1u]), f32(a[i + 2u]), f32(a[i + 3u])),
            vec4<f32>(f32(a[i + 4u]), f32(a[i + 5u]), f32(a[i + 6u]), f32(a[i + 7u])),
        );
    }
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    for (var j = 0u; k0 + j < K; j = j + 1u) {
        let v = f32(a[i + j]);
        if (j < 4u) {
            lo[j] = v;
        } else {
            hi[j - 4u] = v;
        }
    }
    return Run(lo, hi);
}

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let tile = wid.x + wid.y * nwg.x;
    if (tile >= TILES) {
        return;
    }
    let n0 = (tile % TILES_N) * 4u;
    let m0 = (tile / TILES_N) * ROWS;
    // Columns and rows past the end read the last one and are never stored.
    let c0 = min(n0, N - 1u);
    let c1 = min(n0 + 1u, N - 1u);
    let c2 = min(n0 + 2u, N - 1u);
    let c3 = min(n0 + 3u, N - 1u);
{{declare}}
    for (var k0 = t * RUN; k0 < K; k0 = k0 + WG * RUN) {
        let w0 = weights(c0, k0);
        let w1 = weights(c1, k0);
        let w2 = weights(c2, k0);
        let w3 = weights(c3, k0);
        // Column c of each matrix is column n0 + c of W: x * w is the row of products.
        let wl = mat4x4<f32>(w0.lo, w1.lo, w2.lo, w3.lo);
        let wh = mat4x4<f32>(w0.hi, w1.hi, w2.hi, w3.hi);
{{accumulate}}
    }
{{spill}}
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) {
            for (var r = 0u; r < ROWS; r = r + 1u) {
                part[r * WG + t] = part[r * WG + t] + part[r * WG + t + s];
            }
        }
        workgroupBarrier();
    }
    if (t < ROWS * 4u) {
        let m = m0 + t / 4u;
        let n = n0 + t % 4u;
        if (m < M && n < N) {
            out[m * N + n] = {{ty}}(part[(t / 4u) * WG][t % 4u] + bias_of(n));
        }
    }
}
