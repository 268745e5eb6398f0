//! A Slice that is a row crop: its output is rows of contiguous input runs, such as
//! logits cut back from a padded GEMM. Read once while lowering, so a backend with a
//! kernel for it (CUDA: whole rows copied with 16-byte loads and stores, no
//! per-element division, 32-bit offsets within a row) takes it from the movement spec
//! ([`super::index::MovementSpec::crop`]) without reading the graph.

use super::support::{input, output, typed};
use crate::lower::index::strides;
use gopt_ir::ops::ShapeOp;
use gopt_ir::{DType, Graph, Node, Op};

/// The longest row crop's row, bytes (offsets within a row are 32-bit).
const MAX_ROW_BYTES: usize = 1 << 31;

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
    /// The input.
    pub x: u32,
    /// The output.
    pub y: u32,
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
            match bytes.checked_mul(ys[m - 1]).filter(|&b| b <= MAX_ROW_BYTES) {
                Some(b) => bytes = b,
                None => break,
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
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A one-Slice graph: `x: {dt}[{xs}] -> {dt}[{ys}]`, bounds as constants.
    pub(crate) fn slice(dt: &str, xs: &str, ys: &str, bounds: [&str; 4]) -> Graph {
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
