//! Data-movement kernels, from the index maps of [`crate::lower::index`]: Transpose,
//! Slice (constant bounds, positive steps), Gather, Expand, Concat, and the view ops
//! (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as copies when a plan needs one. One
//! thread per output element; the output coordinates are unrolled with constant
//! divisors (shapes are static per bucket) and mapped to the input's offset. Gather
//! checks every index (the indices may be computed on the device): one out of range
//! raises the node's code in the run's error word and reads row 0, never outside the
//! data ([`crate::plan::IndexCheck`]).
//!
//! A Slice that is a row crop ([`RowCrop`]: the output is rows of contiguous input
//! runs, such as logits cut back from a padded GEMM) gets its own kernel instead:
//! groups of threads copy whole rows with 16-byte loads and stores, no per-element
//! division, 32-bit offsets within a row.

use super::elementwise::storage;
use super::Kernel;
use crate::lower::index::{Lit, MovementSpec, Read, RowCrop};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;

const TEMPLATE: &str = include_str!("movement.cu");
const CROP: &str = include_str!("movement_crop.cu");

/// 16-byte vectors each thread of a row-crop tile moves.
const CROP_UNROLL: usize = 4;
/// Threads per row-crop block.
const CROP_BLOCK: usize = 256;
/// Threads per row-crop tile at least: enough for a 2-byte type's head or tail in
/// one step.
const CROP_MIN_GROUP: usize = 8;

/// Code that splits the output index `i` into coordinates `c0..c{r-1}`, innermost
/// first.
fn coords(out: &[usize]) -> String {
    let split: String = (0..out.len())
        .rev()
        .map(|a| {
            format!(
                "        const long long c{a} = r % {d}LL; r /= {d}LL;\n",
                d = out[a]
            )
        })
        .collect();
    format!("        long long r = i;\n{split}        (void)r;\n")
}

/// Emits the kernel of `mv`.
pub fn emit(mv: &MovementSpec, name: &str) -> Result<Kernel> {
    if let Some(crop) = &mv.crop {
        return emit_crop(crop, mv, name);
    }
    let lit = Lit("LL");
    let t = storage(mv.dtype);
    let n: usize = mv.shape.iter().product();
    let mut params: Vec<String> = mv
        .inputs
        .iter()
        .enumerate()
        .map(|(k, (_, dt))| format!("const {}* __restrict__ in{k}", storage(*dt)))
        .collect();
    params.push(format!("{t}* __restrict__ out"));
    let mut check = None;
    let body = match &mv.read {
        Read::Copy => "        out[i] = in0[i];\n".to_string(),
        Read::Strided(at) => format!(
            "{}        out[i] = in0[{}];\n",
            coords(&mv.shape),
            at.write(lit)
        ),
        Read::Gather {
            index,
            data,
            axis_len,
            code,
        } => {
            check = Some(IndexCheck {
                code: *code,
                op: mv.site.op.into(),
                what: MovementSpec::out_of_range(*axis_len),
            });
            params.push("unsigned int* __restrict__ gopt_err".into());
            // Out of range (after the negative wrap): raise the node's code, read row 0.
            format!(
                "{}        long long k = (long long)in1[{}];\n        if (k < 0) k += {axis_len}LL;\n        if (k < 0 || k >= {axis_len}LL) {{ atomicMax(gopt_err, {code}u); k = 0; }}\n        out[i] = in0[{}];\n",
                coords(&mv.shape),
                index.write(lit),
                data.write(lit),
            )
        }
        Read::Concat { axis, parts } => {
            let copy = |(k, (end, at)): (usize, &(usize, crate::lower::index::Index))| {
                let other = if k == 0 { "" } else { "else " };
                format!(
                    "        {other}if (c{axis} < {end}LL) out[i] = in{k}[{}];\n",
                    at.write(lit)
                )
            };
            coords(&mv.shape) + &parts.iter().enumerate().map(copy).collect::<String>()
        }
    };
    let holes = [
        ("what", mv.site.op),
        ("name", name),
        ("params", &params.join(", ")),
        ("n", &n.to_string()),
        ("body", &body),
    ];
    let inputs = mv.inputs.iter().map(|(v, _)| v.0).collect();
    let source = fill(TEMPLATE, &holes)?;
    Ok(Kernel {
        index_check: check,
        ..Kernel::flat(name, &mv.site.node, source, n, inputs, vec![mv.out.0])
    })
}

/// The row-crop kernel: a group of threads (8 for short rows, the block for long ones) per
/// tile of up to `group × CROP_UNROLL` 16-byte vectors of a row.
fn emit_crop(crop: &RowCrop, mv: &MovementSpec, name: &str) -> Result<Kernel> {
    let elem = crop.dtype.size();
    let vec = 16 / elem;
    let vectors = (crop.n * elem).div_ceil(16);
    let group = vectors
        .div_ceil(CROP_UNROLL)
        .next_power_of_two()
        .clamp(CROP_MIN_GROUP, CROP_BLOCK);
    let tile = group * CROP_UNROLL;
    let chunks = vectors.div_ceil(tile).max(1);
    let groups = CROP_BLOCK / group;
    let tiles = crop.rows * chunks;
    let s = |v: usize| v.to_string();
    let holes = [
        ("what", mv.site.op),
        ("name", name),
        ("t", storage(crop.dtype)),
        ("elem", &s(elem)),
        ("vec", &s(vec)),
        ("n", &s(crop.n)),
        ("rows", &s(crop.rows)),
        ("stride", &s(crop.stride)),
        ("base", &s(crop.base)),
        ("group", &s(group)),
        ("groups", &s(groups)),
        ("tile", &s(tile)),
        ("chunks", &s(chunks)),
        ("unroll", &s(CROP_UNROLL)),
    ];
    let grid = u32::try_from(tiles.div_ceil(groups).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX);
    Ok(Kernel {
        name: name.to_string(),
        node: mv.site.node.clone(),
        source: fill(CROP, &holes)?,
        threads: grid as usize * CROP_BLOCK,
        vectorized: true,
        inputs: vec![crop.x],
        outputs: vec![crop.y],
        shared_mem: 0,
        grid,
        block: CROP_BLOCK as u32,
        index_check: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::row_crop::tests::slice;
    use gopt_ir::Graph;

    #[track_caller]
    fn crop(g: &Graph) -> Option<(usize, usize, usize, usize)> {
        spec(g).crop.map(|c| (c.rows, c.n, c.stride, c.base))
    }

    #[track_caller]
    fn spec(g: &Graph) -> MovementSpec {
        crate::lower::index::spec(g, &g.nodes[0], crate::lower::index::Move::Slice).expect("spec")
    }

    #[test]
    fn other_slices_stay_generic() {
        for (g, what) in [
            (
                slice("f32", "2,7,5", "2,3,5", ["1", "7", "1", "2"]),
                "a middle axis with step 2",
            ),
            (
                slice("f32", "2,3,5", "2,3,2", ["0", "5", "2", "3"]),
                "the last axis with step 3",
            ),
            (
                slice(
                    "f32",
                    "6,7,5",
                    "3,3,2",
                    ["0,1,0", "3,4,2", "0,1,2", "1,1,1"],
                ),
                "two axes cut before a cut last axis",
            ),
        ] {
            assert_eq!(crop(&g), None, "{what}");
            let k = emit(&spec(&g), "k0_slice").expect("emits");
            assert!(
                k.source.contains("one thread per output element") && !k.vectorized,
                "{what}\n{}",
                k.source
            );
        }
    }

    #[test]
    fn the_gpt2_crop_gets_the_row_kernel() {
        let g = slice("f32", "4096,50304", "4096,50257", ["0", "50257", "1", "1"]);
        let k = emit(&spec(&g), "k0_slice").expect("emits");
        assert!(k.source.contains("as a row crop"), "{}", k.source);
        assert!(!k.source.contains("% 50257") && !k.source.contains("/ 50257"));
        // Rows of 12,565 vectors: tiles of 256 threads x 4 vectors, 13 per row.
        assert_eq!((k.block, k.grid), (256, 4096 * 13));
        assert!(k.vectorized);
        assert_eq!((k.inputs.len(), k.outputs.len()), (1, 1));
        // A short row: groups of 8 threads, 32 rows per block.
        let g = slice("f32", "2,3,7", "2,3,5", ["1", "6", "2", "1"]);
        let k = emit(&spec(&g), "k0_slice").expect("emits");
        assert!(k.source.contains("threadIdx.x % 8u"), "{}", k.source);
        assert_eq!(k.grid, 1);
    }
}
