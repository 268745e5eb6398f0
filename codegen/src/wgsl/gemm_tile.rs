//! The register tiling shared by the WGSL GEMM (`matmul.rs`) and the conv implicit GEMM
//! (`conv.rs`), as WGSL text: which output tile a workgroup computes ([`tile`], by
//! problem size so the GPU fills), the outer-product K step, accumulators and epilogue
//! calls ([`Tile::body`]), and each operand's cooperative loads into workgroup memory
//! ([`Operand::code`], with an optional custom gather for conv's im2col). Everything is
//! unrolled here with individually named registers, never a private array indexed in a
//! loop: NVIDIA's compiler put those in local memory (measured 50× slower on the conv).

/// Workgroups that fill a large GPU (132 SMs) twice: below this, smaller tiles.
pub(super) const FULL_GRID: usize = 264;
/// One workgroup per SM: small problems (batch-1 transformers, M = 128) take tiles
/// under 64×64 (fewer invocations, still 4×4 each) until at least this many exist.
pub(super) const ONE_WAVE: usize = 132;

/// A workgroup's output tile (`bm`×`bn`) and K slice (`bk`), computed by `ty`×`tx`
/// invocations of `bm/4ty`×`bn/4tx` 4×4 blocks: rows `ty*4 + 4·ty_count·i`, columns
/// `tx*4 + 4·tx_count·j`. Workgroup memory is `bk·(bm+4 + bn+4)` f32 (one vec4 of
/// padding per row keeps the transposed stores off one bank): at most 8.4 KiB.
pub(super) struct Tile {
    pub(super) bm: usize,
    pub(super) bn: usize,
    pub(super) bk: usize,
    /// Invocations along N (`tx` in 0..nx) and along M (`ty` in 0..ny).
    pub(super) nx: usize,
    pub(super) ny: usize,
}

/// (bm, bn, bk, ny, nx, workgroups wanted), largest first; the last is the fallback.
const LADDER: [(usize, usize, usize, usize, usize, usize); 6] = [
    (128, 128, 8, 16, 16, FULL_GRID),
    (128, 64, 16, 16, 16, FULL_GRID),
    (64, 64, 16, 16, 16, ONE_WAVE),
    (32, 64, 16, 8, 16, ONE_WAVE),
    (32, 32, 16, 8, 8, ONE_WAVE),
    (16, 32, 16, 4, 8, 0),
];

/// The largest tile of [`LADDER`] that still gives its workgroup count for `batch`
/// independent `m`×`n` outputs.
pub(super) fn tile(batch: usize, m: usize, n: usize) -> Tile {
    let count = |bm: usize, bn: usize| batch * m.div_ceil(bm) * n.div_ceil(bn);
    let &(bm, bn, bk, ny, nx, _) = LADDER
        .iter()
        .find(|t| count(t.0, t.1) >= t.5)
        .unwrap_or(&LADDER[LADDER.len() - 1]);
    debug_assert!(bk * (bm + 4 + bn + 4) * 4 <= 16384);
    Tile { bm, bn, bk, nx, ny }
}

impl Tile {
    pub(super) fn threads(&self) -> usize {
        self.nx * self.ny
    }

    /// The K step (`kk`) of the outer products, the accumulators, and the epilogue
    /// calls `put(batch, row, col, acc)`, all unrolled.
    pub(super) fn body(&self) -> (String, String, String) {
        let (ga, gb) = (self.bm / (4 * self.ny), self.bn / (4 * self.nx));
        let (p8, p16) = (" ".repeat(8), " ".repeat(16));
        let (mut fma, mut decls, mut out) = (String::new(), String::new(), String::new());
        for g in 0..ga {
            fma += &format!("{p16}let a{g} = As[kk * SA + {}u + ty];\n", self.ny * g);
            out += &format!("{p8}let r{g} = m0 + {}u + ty * 4u;\n", 4 * self.ny * g);
        }
        for g in 0..gb {
            fma += &format!("{p16}let b{g} = Bs[kk * SB + {}u + tx];\n", self.nx * g);
            out += &format!("{p8}let c{g} = n0 + {}u + tx * 4u;\n", 4 * self.nx * g);
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

    /// The template holes every tiled shader shares.
    pub(super) fn holes(&self) -> Vec<(&'static str, String)> {
        let n = |v: usize| v.to_string();
        vec![
            ("bm", n(self.bm)),
            ("bn", n(self.bn)),
            ("bk", n(self.bk)),
            ("nx", n(self.nx)),
            ("threads", n(self.threads())),
            ("tm", n(self.bm / self.ny)),
            ("tn", n(self.bn / self.nx)),
            ("sa", n(self.bm / 4 + 1)),
            ("sb", n(self.bn / 4 + 1)),
            ("as_len", n(self.bk * (self.bm / 4 + 1))),
            ("bs_len", n(self.bk * (self.bn / 4 + 1))),
        ]
    }
}

const XYZW: [&str; 4] = ["x", "y", "z", "w"];

/// A custom gather (conv's im2col and permuted weights) for register `r` whose tile
/// coordinate is the u32 expression given: (code run once per output tile, defining
/// names suffixed with `r`; statements in the load with `t`, `k` and the slice start
/// `kl` in scope; an extra in-bounds condition; the buffer index, already divided by 4
/// for vec4 loads).
pub(super) type Gather<'a> = &'a dyn Fn(usize, &str) -> (String, String, String, String);

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
    pub(super) gather: Option<Gather<'a>>,
}

impl Operand<'_> {
    /// Declarations (with any gather's per-tile code), loads (for K slice `kl`) and
    /// workgroup-memory stores, for tile `tl`.
    pub(super) fn code(&self, tl: &Tile) -> (String, String, String) {
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
        let (bk, threads) = (tl.bk, tl.threads());
        let width = if self.vec { 4 } else { 1 };
        let (p12, p16) = (" ".repeat(12), " ".repeat(16));
        // Per invocation per slice, with `e` its element (or vec4) of the slice:
        // (tile coordinate, K coordinate, default global index).
        let coords = |e: &str| match (self.k_rows, self.vec) {
            (true, true) => (
                format!("{e} / {}u", bk / 4),
                format!("({e} % {}u) * 4u", bk / 4),
            ),
            (true, false) => (format!("{e} / {bk}u"), format!("{e} % {bk}u")),
            (false, true) => (
                format!("({e} % {}u) * 4u", tile / 4),
                format!("{e} / {}u", tile / 4),
            ),
            (false, false) => (format!("{e} % {tile}u"), format!("{e} / {tile}u")),
        };
        let index = match (self.k_rows, self.vec) {
            (true, true) => format!("({base} + ({origin} + t) * K + kl + k) / 4u"),
            (true, false) => format!("{base} + ({origin} + t) * K + kl + k"),
            (false, true) => format!("({base} + (kl + k) * N + {origin} + t) / 4u"),
            (false, false) => format!("{base} + (kl + k) * N + {origin} + t"),
        };
        let ty = if self.vec { "vec4<f32>" } else { "f32" };
        let zero = format!("{ty}(0.0)");
        let (mut decls, mut load, mut store) = (String::new(), String::new(), String::new());
        assert_eq!(
            tile * bk / width % threads,
            0,
            "a tile the invocations split evenly"
        );
        for r in 0..tile * bk / width / threads {
            let e = format!("(lid + {}u)", threads * r);
            let (t, k) = coords(&e);
            let head = format!("{p12}{{\n{p16}let t = {t};\n{p16}let k = {k};\n");
            decls += &format!("        var {reg}{r}: {ty};\n");
            let (pre, cond, idx) = match self.gather {
                Some(gather) => {
                    let (prep, pre, cond, idx) = gather(r, &format!("({t})"));
                    decls += &prep;
                    (pre, format!(" && {cond}"), idx)
                }
                None => (String::new(), String::new(), index.clone()),
            };
            load += &format!(
                "{head}{pre}{p16}{reg}{r} = {zero};\n{p16}if ({origin} + t < {bound} && kl + k < K{cond}) {{ {reg}{r} = {ty}({buf}[{idx}]); }}\n{p12}}}\n"
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
                (true | false, false) => {
                    store += &format!("{p16}{smem}[k * {stride} + t / 4u][t % 4u] = {reg}{r};\n")
                }
            }
            store += &format!("{p12}}}\n");
        }
        (decls, load, store)
    }
}
