//! The register tiling of the WGSL GEMM (`matmul.rs`, `matmul.wgsl`), as WGSL text:
//! which output tile a workgroup computes ([`tile`], by problem size so the GPU fills),
//! the outer-product K step, accumulators and epilogue calls ([`Tile::body`]), and each
//! operand's cooperative loads into workgroup memory ([`Operand::code`]). Everything is
//! unrolled here with individually named registers, never a private array indexed in a
//! loop: NVIDIA's compiler put those in local memory (measured 50× slower on the conv).

/// Workgroups that fill a large GPU (132 SMs) twice: below this, smaller tiles.
pub(super) const FULL_GRID: usize = 264;

/// A workgroup's output tile (`bm`×`bn`, 256 invocations of `bm/16`×`bn/16` outputs)
/// and K slice (`bk`): the largest tile that still gives [`FULL_GRID`] workgroups.
/// Workgroup memory is `bk·(bm+4 + bn+4)` f32 (one vec4 of padding per row keeps the
/// transposed stores off one bank): at most 8.4 KiB, under WebGPU's 16 KiB.
pub(super) struct Tile {
    pub(super) bm: usize,
    pub(super) bn: usize,
    pub(super) bk: usize,
}

pub(super) fn tile(batch: usize, m: usize, n: usize) -> Tile {
    let count = |bm: usize, bn: usize| batch * m.div_ceil(bm) * n.div_ceil(bn);
    let (bm, bn, bk) = if count(128, 128) >= FULL_GRID {
        (128, 128, 8)
    } else if count(128, 64) >= FULL_GRID {
        (128, 64, 16)
    } else {
        (64, 64, 16)
    };
    debug_assert!(bk * (bm + 4 + bn + 4) * 4 <= 16384);
    Tile { bm, bn, bk }
}

impl Tile {
    /// The K step (`kk`) of the outer products, the accumulators, and the epilogue
    /// calls, all unrolled: rows `ty*4 + 64i`, columns `tx*4 + 64j` of the tile.
    pub(super) fn body(&self) -> (String, String, String) {
        let (ga, gb) = (self.bm / 64, self.bn / 64);
        let (p8, p16) = (" ".repeat(8), " ".repeat(16));
        let (mut fma, mut decls, mut out) = (String::new(), String::new(), String::new());
        for g in 0..ga {
            fma += &format!("{p16}let a{g} = As[kk * SA + {}u + ty];\n", 16 * g);
            out += &format!("{p8}let r{g} = m0 + {}u + ty * 4u;\n", 64 * g);
        }
        for g in 0..gb {
            fma += &format!("{p16}let b{g} = Bs[kk * SB + {}u + tx];\n", 16 * g);
            out += &format!("{p8}let c{g} = n0 + {}u + tx * 4u;\n", 64 * g);
        }
        for i in 0..4 * ga {
            let (g, c) = (i / 4, XYZW[i % 4]);
            for j in 0..gb {
                decls += &format!("{p8}var acc{i}_{j}: vec4<f32> = vec4<f32>(0.0);\n");
                fma += &format!("{p16}acc{i}_{j} = fma(vec4<f32>(a{g}.{c}), b{j}, acc{i}_{j});\n");
                for (cc, name) in XYZW.iter().enumerate() {
                    out += &format!(
                        "{p8}put(batch, r{g} + {}u, c{j} + {cc}u, acc{i}_{j}.{name});\n",
                        i % 4
                    );
                }
            }
        }
        (fma, decls, out)
    }
}

const XYZW: [&str; 4] = ["x", "y", "z", "w"];

/// One operand's way from global memory into its `[BK][tile]` slice of workgroup
/// memory (vec4 rows of stride `stride`): loaded into registers (`reg0..`, zeros
/// outside the matrix), then stored. `k_rows`: K is contiguous in global memory (A,
/// or B transposed: element (t, k) at `(origin + t)·K + k`); else the tile dimension is
/// (B: element (k, t) at `k·N + origin + t`). `vec`: vec4 loads (rows a multiple of 4).
pub(super) struct Operand<'a> {
    pub(super) buf: &'a str,
    pub(super) reg: &'a str,
    pub(super) smem: &'a str,
    pub(super) stride: &'a str,
    pub(super) tile: usize,
    pub(super) origin: &'a str,
    pub(super) bound: &'a str,
    pub(super) base: &'a str,
    pub(super) k_rows: bool,
    pub(super) vec: bool,
}

impl Operand<'_> {
    /// Declarations, loads (for K slice `kl`) and workgroup-memory stores.
    pub(super) fn code(&self, bk: usize) -> (String, String, String) {
        let Operand {
            buf,
            reg,
            smem,
            stride,
            tile,
            origin,
            bound,
            base,
            ..
        } = *self;
        let width = if self.vec { 4 } else { 1 };
        let (p12, p16) = (" ".repeat(12), " ".repeat(16));
        // Per invocation per slice; with `e` its element (or vec4) of the slice:
        // (coordinates, bounds, global index, whether it stores one whole vec4).
        let (t, k, index) = match (self.k_rows, self.vec) {
            (true, true) => (
                format!("e / {}u", bk / 4),
                format!("(e % {}u) * 4u", bk / 4),
                format!("({base} + ({origin} + t) * K + kl + k) / 4u"),
            ),
            (true, false) => (
                format!("e / {bk}u"),
                format!("e % {bk}u"),
                format!("{base} + ({origin} + t) * K + kl + k"),
            ),
            (false, true) => (
                format!("(e % {}u) * 4u", tile / 4),
                format!("e / {}u", tile / 4),
                format!("({base} + (kl + k) * N + {origin} + t) / 4u"),
            ),
            (false, false) => (
                format!("e % {tile}u"),
                format!("e / {tile}u"),
                format!("{base} + (kl + k) * N + {origin} + t"),
            ),
        };
        let ty = if self.vec { "vec4<f32>" } else { "f32" };
        let zero = format!("{ty}(0.0)");
        let (mut decls, mut load, mut store) = (String::new(), String::new(), String::new());
        for r in 0..tile * bk / width / 256 {
            let head = format!(
                "{p12}{{\n{p16}let e = lid + {}u;\n{p16}let t = {t};\n{p16}let k = {k};\n",
                256 * r
            );
            decls += &format!("        var {reg}{r}: {ty};\n");
            load += &format!(
                "{head}{p16}{reg}{r} = {zero};\n{p16}if ({origin} + t < {bound} && kl + k < K) {{ {reg}{r} = {ty}({buf}[{index}]); }}\n{p12}}}\n"
            );
            store += &head;
            match (self.k_rows, self.vec) {
                (false, true) => {
                    store += &format!("{p16}{smem}[k * {stride} + t / 4u] = {reg}{r};\n")
                }
                (true, true) => {
                    for (c, name) in XYZW.iter().enumerate() {
                        store += &format!(
                            "{p16}{smem}[(k + {c}u) * {stride} + t / 4u][t % 4u] = {reg}{r}.{name};\n"
                        );
                    }
                }
                _ => store += &format!("{p16}{smem}[k * {stride} + t / 4u][t % 4u] = {reg}{r};\n"),
            }
            store += &format!("{p12}}}\n");
        }
        (decls, load, store)
    }
}
