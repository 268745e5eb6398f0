//! In-workgroup split-K for small GEMMs (`matmul_split.wgsl`): when the register-tiled
//! ladder of `gemm_tile.rs` leaves the GPU nearly idle (batch-1 transformers: M = 128
//! gives ~200 workgroups of 32 invocations, each running all of K serially), a
//! workgroup keeps a small output tile but runs `S` invocation groups of the tile's
//! size (256 invocations in all). All invocations stage a K block of `S` slices per
//! barrier; group `s` multiplies slice `s` of each block into its own 4×4 accumulators.
//! After the K loop the `S` partial sums are reduced through the (then free) workgroup
//! memory in a tree of rounds, in chunks of accumulators that fit, and group 0 runs the
//! unchanged epilogue. No extra buffers or dispatches. Everything is unrolled with
//! named registers, like the rest of the GEMM.

use super::gemm_tile::Tile;

/// Invocations in flight that fill a large GPU (132 SMs of 256 resident invocations):
/// below this, with K long enough, split K.
const FILL: usize = 132 * 256;
/// The shortest K worth splitting.
const MIN_K: usize = 256;
/// Invocations per split workgroup.
const THREADS: usize = 256;
/// Workgroup memory, in vec4s (16 KiB).
const SMEM: usize = 1024;

/// Output tiles a split workgroup may take, (bm, bn, ny, nx), largest first: 4×4 per
/// invocation, `nx·ny` invocations per group.
const CANDIDATES: [(usize, usize, usize, usize); 3] =
    [(32, 64, 8, 16), (32, 32, 8, 8), (16, 32, 4, 8)];

/// A split-K plan: the tile of one group (`bk`: the slice each group multiplies per
/// block), the number of groups `s` and the staged K block `kb = s·bk`.
pub(super) struct Split {
    pub(super) tile: Tile,
    pub(super) s: usize,
    pub(super) kb: usize,
}

/// The split-K plan for `batch` `m`×`n` outputs over `k`, if `regular` (the ladder's
/// tile) would leave the GPU under-filled and K is long enough: the largest candidate
/// tile whose workgroups fill it, else the smallest.
pub(super) fn split(batch: usize, m: usize, n: usize, k: usize, regular: &Tile) -> Option<Split> {
    let count = |bm: usize, bn: usize| batch * m.div_ceil(bm) * n.div_ceil(bn);
    if k < MIN_K || count(regular.bm, regular.bn) * regular.threads() >= FILL {
        return None;
    }
    let &(bm, bn, ny, nx) = CANDIDATES
        .iter()
        .find(|c| count(c.0, c.1) * THREADS >= FILL)
        .unwrap_or(&CANDIDATES[CANDIDATES.len() - 1]);
    let s = THREADS / (nx * ny);
    let row = bm / 4 + 1 + bn / 4 + 1;
    let mut kb = 64;
    while kb * row > SMEM {
        kb /= 2;
    }
    debug_assert!(kb / s >= 4 && kb % (4 * s) == 0);
    Some(Split {
        tile: Tile {
            bm,
            bn,
            bk: kb / s,
            nx,
            ny,
        },
        s,
        kb,
    })
}

impl Split {
    /// The tile all invocations load a whole K block for (`kb` slices, `ny·s` rows of
    /// invocations), for [`super::gemm_tile::Operand::code`].
    pub(super) fn load_tile(&self) -> Tile {
        let t = &self.tile;
        Tile {
            bm: t.bm,
            bn: t.bn,
            bk: self.kb,
            nx: t.nx,
            ny: t.ny * self.s,
        }
    }

    /// Workgroup memory lengths (vec4s) of `As` (`[KB][BM/4+1]`) and `Bs`.
    pub(super) fn lens(&self) -> (usize, usize) {
        let t = &self.tile;
        (self.kb * (t.bm / 4 + 1), self.kb * (t.bn / 4 + 1))
    }

    /// The reduction of the groups' accumulators into group 0's, unrolled: rounds
    /// of half `h` (groups `h..2h` write, `0..h` add), each in chunks of whole
    /// accumulator planes (`h·T` vec4s) that fit in `As` and `Bs`.
    pub(super) fn reduce(&self) -> String {
        let t = &self.tile;
        let (ga, gb) = (t.bm / (4 * t.ny), t.bn / (4 * t.nx));
        let accs: Vec<String> = (0..4 * ga)
            .flat_map(|i| (0..gb).map(move |j| format!("acc{i}_{j}")))
            .collect();
        let (as_len, bs_len) = self.lens();
        let group = t.threads();
        let (p8, p12) = (" ".repeat(8), " ".repeat(12));
        let mut code = String::new();
        let mut h = self.s / 2;
        while h >= 1 {
            let plane = h * group;
            // Slots for one chunk: (array, offset).
            let slots: Vec<(&str, usize)> = (0..as_len / plane)
                .map(|p| ("As", p * plane))
                .chain((0..bs_len / plane).map(|p| ("Bs", p * plane)))
                .collect();
            assert!(!slots.is_empty(), "a reduction plane fits");
            for chunk in accs.chunks(slots.len()) {
                let (mut put, mut add) = (String::new(), String::new());
                for (acc, (arr, off)) in chunk.iter().zip(&slots) {
                    put += &format!("{p12}{arr}[{off}u + (s - {h}u) * {group}u + lg] = {acc};\n");
                    add += &format!("{p12}{acc} = {acc} + {arr}[{off}u + s * {group}u + lg];\n");
                }
                code += &format!(
                    "{p8}if (s >= {h}u && s < {}u) {{\n{put}{p8}}}\n{p8}workgroupBarrier();\n",
                    2 * h
                );
                code += &format!("{p8}if (s < {h}u) {{\n{add}{p8}}}\n{p8}workgroupBarrier();\n");
            }
            h /= 2;
        }
        code
    }
}
