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
use super::support::{blocks, input, output, strides, typed};
use super::Kernel;
use crate::lower::index::{movement, Lit, Read};
use crate::plan::{index_code, IndexCheck};
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op};

const TEMPLATE: &str = include_str!("movement.cu");
const CROP: &str = include_str!("movement_crop.cu");

/// 16-byte vectors each thread of a row-crop tile moves.
const CROP_UNROLL: usize = 4;
/// Threads per row-crop block.
const CROP_BLOCK: usize = 256;
/// Threads per row-crop tile at least: enough for a 2-byte type's head or tail in
/// one step.
const CROP_MIN_GROUP: usize = 8;
/// The longest row crop's row, bytes (offsets within a row are 32-bit).
const MAX_ROW_BYTES: usize = 1 << 31;

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

/// Emits the kernel for `node`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<Kernel> {
    if let Some(crop) = RowCrop::of(g, node) {
        return crop.emit(node, name);
    }
    let mv = movement(g, node, Lit("LL")).map_err(|e| e.for_backend("CUDA"))?;
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
        Read::Strided(at) => format!("{}        out[i] = in0[{at}];\n", coords(&mv.shape)),
        Read::Gather {
            index,
            data,
            axis_len,
        } => {
            let code = index_code(g, node)?;
            check = Some(IndexCheck {
                code,
                op: node.op.name().into(),
                what: format!("an index out of range for an axis of length {axis_len}"),
            });
            params.push("unsigned int* __restrict__ gopt_err".into());
            // Out of range (after the negative wrap): raise the node's code, read row 0.
            format!(
                "{}        long long k = (long long)in1[{index}];\n        if (k < 0) k += {axis_len}LL;\n        if (k < 0 || k >= {axis_len}LL) {{ atomicMax(gopt_err, {code}u); k = 0; }}\n        out[i] = in0[{data}];\n",
                coords(&mv.shape),
            )
        }
        Read::Concat { axis, parts } => {
            let copy = |(k, (end, at)): (usize, &(usize, String))| {
                let other = if k == 0 { "" } else { "else " };
                format!("        {other}if (c{axis} < {end}LL) out[i] = in{k}[{at}];\n")
            };
            coords(&mv.shape) + &parts.iter().enumerate().map(copy).collect::<String>()
        }
    };
    let holes = [
        ("what", node.op.name()),
        ("name", name),
        ("params", &params.join(", ")),
        ("n", &n.to_string()),
        ("body", &body),
    ];
    let inputs = mv.inputs.iter().map(|(v, _)| v.0).collect();
    let mut k = grid_stride(node, name, fill(TEMPLATE, &holes)?, n, inputs);
    k.outputs = vec![mv.out.0];
    k.index_check = check;
    Ok(k)
}

/// A grid-stride kernel of `n` threads in blocks of 256, reading `inputs` (its outputs
/// and index check left for the caller).
pub(super) fn grid_stride(
    node: &Node,
    name: &str,
    source: String,
    n: usize,
    inputs: Vec<u32>,
) -> Kernel {
    Kernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        threads: n,
        vectorized: false,
        inputs,
        outputs: Vec::new(),
        shared_mem: 0,
        grid: blocks(n, 256),
        block: 256,
        index_check: None,
    }
}

/// A Slice whose output is `rows` runs of `n` contiguous input elements, run `r`
/// starting at input element `base + r * stride`: the last axis sliced with step 1
/// (a run is it and the whole axes after an axis sliced with step 1), and the axes
/// before the run's sliced so that consecutive output rows are one input stride apart
/// (whole, or length 1, or one of them with any step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowCrop {
    /// The copied elements' dtype.
    pub dtype: DType,
    /// Output rows.
    pub rows: usize,
    /// Elements per row.
    pub n: usize,
    /// Input elements from one row's run to the next's.
    pub stride: usize,
    /// The input element row 0 starts at.
    pub base: usize,
    /// The input and the output.
    x: u32,
    y: u32,
}

impl RowCrop {
    /// The row crop `node` is, if it is a Slice of one (static shapes, constant bounds,
    /// a non-empty output whose rows fit 32-bit byte offsets); `None` leaves the node
    /// to the generic kernel, which reports what it cannot do.
    pub fn of(g: &Graph, node: &Node) -> Option<RowCrop> {
        if !matches!(node.op, Op::Shape(ShapeOp::Slice)) {
            return None;
        }
        let (x, y) = (input(node, 0).ok()?, output(node, 0).ok()?);
        let (dtype, xs) = typed(g, node, x).ok()?;
        let (_, ys) = typed(g, node, y).ok()?;
        let r = xs.len();
        if r == 0 || ys.len() != r {
            return None;
        }
        let (start, step) = crate::lower::index::slice_window(g, node, &xs).ok()?;
        let start: Vec<usize> = start.into_iter().map(|s| s as usize).collect();
        let last = r - 1;
        let unit = |a: usize| ys[a] <= 1 || step[a] == 1;
        let whole = |a: usize| ys[a] == xs[a] && (xs[a] <= 1 || (start[a] == 0 && step[a] == 1));
        if ys.contains(&0) || !unit(last) {
            return None;
        }
        // The run: axis `m` (step 1) and the whole axes after it, while its bytes fit
        // 32-bit offsets.
        let mut m = last;
        let mut bytes = ys[last].checked_mul(dtype.size())?;
        while m > 0 && whole(m) && unit(m - 1) {
            match bytes.checked_mul(ys[m - 1]) {
                Some(b) if b <= MAX_ROW_BYTES => bytes = b,
                _ => break,
            }
            m -= 1;
        }
        if bytes > MAX_ROW_BYTES {
            return None;
        }
        // Rows over the axes before `m`: one input stride per row, whatever the
        // coordinates (the innermost axis longer than 1 sets it).
        let st = strides(&xs);
        let mut stride = None;
        let mut span = 1usize;
        for a in (0..m).rev() {
            if ys[a] > 1 {
                let along = (step[a] as usize).checked_mul(st[a])?;
                let s = *stride.get_or_insert(along);
                if s.checked_mul(span)? != along {
                    return None;
                }
            }
            span *= ys[a];
        }
        Some(RowCrop {
            dtype,
            rows: span,
            n: ys[m..].iter().product(),
            stride: stride.unwrap_or(st[m] * xs[m]),
            base: (0..r).map(|a| start[a] * st[a]).sum(),
            x: x.0,
            y: y.0,
        })
    }

    /// The kernel: a group of threads (8 for short rows, the block for long ones) per
    /// tile of up to `group × CROP_UNROLL` 16-byte vectors of a row.
    fn emit(&self, node: &Node, name: &str) -> Result<Kernel> {
        let elem = self.dtype.size();
        let vec = 16 / elem;
        let vectors = (self.n * elem).div_ceil(16);
        let group = vectors
            .div_ceil(CROP_UNROLL)
            .next_power_of_two()
            .clamp(CROP_MIN_GROUP, CROP_BLOCK);
        let tile = group * CROP_UNROLL;
        let chunks = vectors.div_ceil(tile).max(1);
        let groups = CROP_BLOCK / group;
        let tiles = self.rows * chunks;
        let s = |v: usize| v.to_string();
        let holes = [
            ("what", node.op.name()),
            ("name", name),
            ("t", storage(self.dtype)),
            ("elem", &s(elem)),
            ("vec", &s(vec)),
            ("n", &s(self.n)),
            ("rows", &s(self.rows)),
            ("stride", &s(self.stride)),
            ("base", &s(self.base)),
            ("group", &s(group)),
            ("groups", &s(groups)),
            ("tile", &s(tile)),
            ("chunks", &s(chunks)),
            ("unroll", &s(CROP_UNROLL)),
        ];
        let grid = u32::try_from(tiles.div_ceil(groups).clamp(1, 65_535 * 32)).unwrap_or(u32::MAX);
        Ok(Kernel {
            name: name.to_string(),
            node: node.name.clone(),
            source: fill(CROP, &holes)?,
            threads: grid as usize * CROP_BLOCK,
            vectorized: true,
            inputs: vec![self.x],
            outputs: vec![self.y],
            shared_mem: 0,
            grid,
            block: CROP_BLOCK as u32,
            index_check: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-Slice graph: `x: {dt}[{xs}] -> {dt}[{ys}]`, bounds as constants.
    fn slice(dt: &str, xs: &str, ys: &str, bounds: [&str; 4]) -> Graph {
        let [starts, ends, axes, steps] = bounds;
        let k = starts.split(',').count();
        let src = format!(
            r#"graph "g"(%0 "x": {dt}[{xs}]) -> (%5) {{
  %1 "s": i64[{k}] = const [{starts}]
  %2 "e": i64[{k}] = const [{ends}]
  %3 "a": i64[{k}] = const [{axes}]
  %4 "p": i64[{k}] = const [{steps}]
  %5 "y": {dt}[{ys}] = Slice "slice"(%0, %1, %2, %3, %4)
}}"#
        );
        let g = gopt_ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        gopt_ir::verify(g)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .into_inner()
    }

    #[track_caller]
    fn crop(g: &Graph) -> Option<(usize, usize, usize, usize)> {
        RowCrop::of(g, &g.nodes[0]).map(|c| (c.rows, c.n, c.stride, c.base))
    }

    #[test]
    fn row_crops_are_recognized() {
        let gpt2 = slice("f32", "4096,50304", "4096,50257", ["0", "50257", "1", "1"]);
        assert_eq!(crop(&gpt2), Some((4096, 50257, 50304, 0)));
        let small = slice("f32", "2,3,7", "2,3,5", ["1", "6", "-1", "1"]);
        assert_eq!(crop(&small), Some((6, 5, 7, 1)));
        let bf16 = slice("bf16", "3,1000", "3,997", ["-997", "1000", "1", "1"]);
        assert_eq!(crop(&bf16), Some((3, 997, 1000, 3)));
        // The last token of every sequence: rows a sequence apart.
        let last = slice("f32", "4,9,16", "4,1,16", ["8", "9", "1", "1"]);
        assert_eq!(crop(&last), Some((4, 16, 144, 128)));
        // Every other row, cropped.
        let every = slice("i64", "8,10", "4,6", ["1,2", "8,8", "0,1", "2,1"]);
        assert_eq!(crop(&every), Some((4, 6, 20, 12)));
        // A middle axis with the whole axes after it: runs of 3 x 5.
        let middle = slice("f32", "2,7,5", "2,3,5", ["2", "5", "1", "1"]);
        assert_eq!(crop(&middle), Some((2, 15, 35, 10)));
        let flat = slice("u8", "783", "700", ["5", "705", "0", "1"]);
        assert_eq!(crop(&flat), Some((1, 700, 783, 5)));
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
            let k = emit(&g, &g.nodes[0], "k0_slice").expect("emits");
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
        let k = emit(&g, &g.nodes[0], "k0_slice").expect("emits");
        assert!(k.source.contains("as a row crop"), "{}", k.source);
        assert!(!k.source.contains("% 50257") && !k.source.contains("/ 50257"));
        // Rows of 12,565 vectors: tiles of 256 threads x 4 vectors, 13 per row.
        assert_eq!((k.block, k.grid), (256, 4096 * 13));
        assert!(k.vectorized);
        assert_eq!((k.inputs.len(), k.outputs.len()), (1, 1));
        // A short row: groups of 8 threads, 32 rows per block.
        let g = slice("f32", "2,3,7", "2,3,5", ["1", "6", "2", "1"]);
        let k = emit(&g, &g.nodes[0], "k0_slice").expect("emits");
        assert!(k.source.contains("threadIdx.x % 8u"), "{}", k.source);
        assert_eq!(k.grid, 1);
    }

    /// Seeded slices of small tensors (ranks 1 to 4, any bounds, steps 1 to 3): where
    /// one is a row crop, its rows are exactly the interpreter's result.
    #[test]
    fn row_crops_read_what_the_interpreter_slices() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let (mut crops, mut others) = (0, 0);
        for _ in 0..1000 {
            let r = 1 + next(4) as usize;
            let xs: Vec<usize> = (0..r).map(|_| 1 + next(6) as usize).collect();
            let mut ys = xs.clone();
            let (mut starts, mut ends, mut axes, mut steps) = (vec![], vec![], vec![], vec![]);
            for (a, &d) in xs.iter().enumerate() {
                if next(3) == 0 {
                    continue;
                }
                let d = d as i64;
                let s = next(d as u64) as i64;
                let e = s + 1 + next((d - s + 1) as u64) as i64;
                let st = [1, 1, 2, 3][next(4) as usize];
                // Negative starts and axes half the time, as ONNX allows.
                starts.push(if next(2) == 0 { s } else { s - d });
                ends.push(e);
                axes.push(if next(2) == 0 {
                    a as i64
                } else {
                    a as i64 - r as i64
                });
                steps.push(st);
                ys[a] = usize::try_from((e.min(d) - s + st - 1).div_euclid(st)).unwrap_or(0);
            }
            if axes.is_empty() || ys.contains(&0) {
                continue;
            }
            let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let dims = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
            let (s, e, a, p) = (list(&starts), list(&ends), list(&axes), list(&steps));
            let g = slice("i64", &dims(&xs), &dims(&ys), [&s, &e, &a, &p]);
            let total: usize = xs.iter().product();
            let iota: Vec<f64> = (0..total).map(|i| i as f64).collect();
            let x = gopt_ir::Tensor::from_f64s(DType::I64, &xs, &iota).expect("x");
            let want = gopt_ir::interp::run(&g, &[x]).expect("interpreter")[0].to_i64_vec();
            let Some(c) = RowCrop::of(&g, &g.nodes[0]) else {
                others += 1;
                continue;
            };
            crops += 1;
            let got: Vec<i64> = (0..c.rows * c.n)
                .map(|i| (c.base + (i / c.n) * c.stride + i % c.n) as i64)
                .collect();
            assert_eq!(got, want, "{xs:?} -> {ys:?}: {c:?}");
        }
        assert!(crops > 300 && others > 50, "{crops} crops, {others} others");
    }
}
