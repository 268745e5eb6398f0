//! Sliding-window geometry shared by convolutions and pools: reading `kernel_shape`,
//! `strides`, `dilations`, `pads`, `auto_pad` and `ceil_mode`, computing output sizes
//! (concrete, and symbolic for inference), and walking the input elements one kernel
//! tap reads ([`for_each_line`]), which im2col, depthwise convolution and col2im share.

use crate::dim::Dim;
use crate::error::{shape_err, IrError, Result};
use crate::graph::Node;
use crate::ops::InferCx;

/// `auto_pad`: how padding is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// Output `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, extra padding at the start.
    SameLower,
    /// No padding.
    Valid,
}

impl AutoPad {
    /// Reads the attribute (default NOTSET).
    pub fn from_node(node: &Node) -> Result<AutoPad> {
        match node.attrs.str_or("auto_pad", "NOTSET")? {
            "NOTSET" | "" => Ok(AutoPad::NotSet),
            "SAME_UPPER" => Ok(AutoPad::SameUpper),
            "SAME_LOWER" => Ok(AutoPad::SameLower),
            "VALID" => Ok(AutoPad::Valid),
            other => Err(IrError::Attr {
                name: "auto_pad".into(),
                msg: format!("unknown mode `{other}`"),
            }),
        }
    }
}

/// The window attributes of a conv or pool node, independent of the input's size.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// Kernel extent per spatial dim.
    pub kernel: Vec<usize>,
    /// Step per spatial dim.
    pub strides: Vec<usize>,
    /// Gap between taps per spatial dim.
    pub dilations: Vec<usize>,
    /// Explicit pads: all begins, then all ends.
    pub pads: Vec<usize>,
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Round output sizes up (pools).
    pub ceil_mode: bool,
}

/// Reads a list of positive integers of length `n`, or `default` repeated.
fn dims_attr(node: &Node, name: &str, n: usize, default: usize, min: i64) -> Result<Vec<usize>> {
    match node.attrs.ints(name)? {
        None => Ok(vec![default; n]),
        Some(v) if v.len() == n && v.iter().all(|&x| x >= min) => {
            Ok(v.iter().map(|&x| x as usize).collect())
        }
        Some(v) => Err(IrError::Attr {
            name: name.into(),
            msg: format!("expected {n} values >= {min}, found {v:?}"),
        }),
    }
}

impl Window {
    /// Reads the attributes for `kernel` (already known: from `kernel_shape` or the
    /// weights).
    pub fn from_node(node: &Node, kernel: Vec<usize>) -> Result<Window> {
        let n = kernel.len();
        if n == 0 {
            return shape_err("sliding-window ops need at least one spatial dim");
        }
        if kernel.contains(&0) {
            return shape_err(format!("kernel {kernel:?} has an empty dim"));
        }
        Ok(Window {
            strides: dims_attr(node, "strides", n, 1, 1)?,
            dilations: dims_attr(node, "dilations", n, 1, 1)?,
            pads: dims_attr(node, "pads", 2 * n, 0, 0)?,
            auto_pad: AutoPad::from_node(node)?,
            ceil_mode: node.attrs.int_or("ceil_mode", 0)? != 0,
            kernel,
        })
    }

    /// `kernel_shape` when given (checked against `rank` spatial dims), else `fallback`.
    pub fn kernel_attr(node: &Node, fallback: Option<Vec<usize>>) -> Result<Vec<usize>> {
        match (node.attrs.ints("kernel_shape")?, fallback) {
            (Some(k), _) if k.iter().all(|&x| x > 0) => Ok(k.iter().map(|&x| x as usize).collect()),
            (Some(k), _) => Err(IrError::Attr {
                name: "kernel_shape".into(),
                msg: format!("expected positive values, found {k:?}"),
            }),
            (None, Some(f)) => Ok(f),
            (None, None) => Err(IrError::Attr {
                name: "kernel_shape".into(),
                msg: "required but missing".into(),
            }),
        }
    }

    /// Extent of the dilated kernel along dim `i` (an error when it overflows).
    fn span(&self, i: usize) -> Result<usize> {
        (self.kernel[i] - 1)
            .checked_mul(self.dilations[i])
            .and_then(|v| v.checked_add(1))
            .ok_or_else(|| overflow(i))
    }

    /// Output size and begin/end pads of dim `i` for an input of size `input`.
    fn dim(&self, i: usize, input: usize) -> Result<(usize, usize, usize)> {
        let (s, span) = (self.strides[i], self.span(i)?);
        let d = self.kernel.len();
        match self.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                let out = input.div_ceil(s);
                let total = ((out.max(1) - 1) * s)
                    .checked_add(span)
                    .ok_or_else(|| overflow(i))?
                    .saturating_sub(input);
                let begin = if self.auto_pad == AutoPad::SameUpper {
                    total / 2
                } else {
                    total - total / 2
                };
                Ok((out, begin, total - begin))
            }
            AutoPad::NotSet | AutoPad::Valid => {
                let (pb, pe) = if self.auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    (self.pads[i], self.pads[d + i])
                };
                let avail = input
                    .checked_add(pb)
                    .and_then(|v| v.checked_add(pe))
                    .ok_or_else(|| overflow(i))?;
                if avail < span {
                    return shape_err(format!(
                        "spatial dim {i}: input {input} with pads ({pb}, {pe}) is smaller than \
                         the kernel's extent {span}"
                    ));
                }
                let mut out = if self.ceil_mode {
                    (avail - span).div_ceil(s) + 1
                } else {
                    (avail - span) / s + 1
                };
                // The last window must start inside the input or the begin padding.
                if self.ceil_mode && (out - 1).saturating_mul(s) >= input.saturating_add(pb) {
                    out -= 1;
                }
                Ok((out, pb, pe))
            }
        }
    }

    /// Resolves the window against concrete input spatial dims.
    pub fn resolve(&self, input: &[usize]) -> Result<Geometry> {
        if input.len() != self.kernel.len() {
            return shape_err(format!(
                "input has {} spatial dims, kernel {:?} has {}",
                input.len(),
                self.kernel,
                self.kernel.len()
            ));
        }
        let mut g = Geometry {
            input: input.to_vec(),
            out: vec![],
            kernel: self.kernel.clone(),
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pad_begin: vec![],
            pad_end: vec![],
        };
        for (i, &x) in input.iter().enumerate() {
            let (o, b, e) = self.dim(i, x)?;
            g.out.push(o);
            g.pad_begin.push(b);
            g.pad_end.push(e);
        }
        Ok(g)
    }

    /// Output spatial dims for symbolic input dims: computed where the input is known,
    /// an expression where it can be written with `+` and floor `/`, else a fresh symbol.
    pub fn out_dims(&self, cx: &mut InferCx, input: &[Dim]) -> Result<Vec<Dim>> {
        if input.len() != self.kernel.len() {
            return shape_err(format!(
                "input has {} spatial dims, kernel {:?} has {}",
                input.len(),
                self.kernel,
                self.kernel.len()
            ));
        }
        let d = self.kernel.len();
        input
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if let Dim::Known(n) = x {
                    return Ok(Dim::from(self.dim(i, *n as usize)?.0));
                }
                let s = self.strides[i] as u64;
                let span = i64::try_from(self.span(i)?).map_err(|_| overflow(i))?;
                Ok(match self.auto_pad {
                    AutoPad::SameUpper | AutoPad::SameLower => {
                        x.add(&Dim::Known(s - 1)).div(&Dim::Known(s))
                    }
                    AutoPad::NotSet | AutoPad::Valid if !self.ceil_mode => {
                        let pads = if self.auto_pad == AutoPad::Valid {
                            0
                        } else {
                            i64::try_from(self.pads[i])
                                .ok()
                                .and_then(|b| b.checked_add(i64::try_from(self.pads[d + i]).ok()?))
                                .ok_or_else(|| overflow(i))?
                        };
                        let c = (pads - span)
                            .checked_add(s as i64)
                            .ok_or_else(|| overflow(i))?;
                        if c >= 0 {
                            x.add(&Dim::Known(c as u64)).div(&Dim::Known(s))
                        } else {
                            cx.fresh_dim("spatial")
                        }
                    }
                    AutoPad::NotSet | AutoPad::Valid => cx.fresh_dim("spatial"),
                })
            })
            .collect()
    }
}

/// The error for window arithmetic (pads, strides, dilations) that overflows.
fn overflow(i: usize) -> IrError {
    IrError::Shape(format!(
        "spatial dim {i}: the window's pads, strides or dilations overflow 64 bits"
    ))
}

/// A window resolved against one input: every size the kernels need.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    /// Input spatial dims.
    pub input: Vec<usize>,
    /// Output spatial dims.
    pub out: Vec<usize>,
    /// Kernel extent per dim.
    pub kernel: Vec<usize>,
    /// Step per dim.
    pub strides: Vec<usize>,
    /// Tap gap per dim.
    pub dilations: Vec<usize>,
    /// Padding before the input per dim.
    pub pad_begin: Vec<usize>,
    /// Padding after the input per dim.
    pub pad_end: Vec<usize>,
}

impl Geometry {
    /// Elements of one input plane.
    pub fn in_size(&self) -> usize {
        self.input.iter().product()
    }
    /// Elements of one output plane.
    pub fn out_size(&self) -> usize {
        self.out.iter().product()
    }
    /// Taps of the kernel.
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }
    /// The multi-index of tap `t` (row-major over the kernel).
    pub fn tap(&self, mut t: usize) -> Vec<usize> {
        let mut k = vec![0; self.kernel.len()];
        for i in (0..k.len()).rev() {
            k[i] = t % self.kernel[i];
            t /= self.kernel[i];
        }
        k
    }
}

/// One run of output positions that a kernel tap maps onto input elements: output
/// positions `out..out + len` read input elements `inp, inp + step, ...`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line {
    /// Flat index of the first output position.
    pub out: usize,
    /// Flat index of the first input element.
    pub inp: usize,
    /// Input step between consecutive output positions (the last dim's stride).
    pub step: usize,
    /// Number of positions.
    pub len: usize,
}

/// Calls `f` for each [`Line`] of kernel tap `tap`: the output positions whose tap
/// lands inside the input (not in the padding), grouped along the last dim. Each
/// output position `o` reads input coordinate `o * stride - pad_begin + tap * dilation`.
pub(crate) fn for_each_line(g: &Geometry, tap: &[usize], mut f: impl FnMut(Line)) {
    let d = g.input.len();
    let last = d - 1;
    // Valid range of the last dim's output positions, and the matching input start.
    let off = |i: usize| (tap[i] * g.dilations[i]) as i64 - g.pad_begin[i] as i64;
    let (s, o_last, w) = (g.strides[last] as i64, off(last), g.input[last] as i64);
    let lo = if o_last >= 0 {
        0
    } else {
        (-o_last + s - 1) / s
    };
    let hi = ((w - o_last + s - 1) / s).clamp(0, g.out[last] as i64);
    if lo >= hi {
        return;
    }
    let lines: usize = g.out[..last].iter().product();
    let mut idx = vec![0usize; last];
    for line in 0..lines {
        let mut inp = 0i64;
        let mut inside = true;
        for (i, &o) in idx.iter().enumerate() {
            let c = o as i64 * g.strides[i] as i64 + off(i);
            if c < 0 || c >= g.input[i] as i64 {
                inside = false;
                break;
            }
            inp = inp * g.input[i] as i64 + c;
        }
        if inside {
            let first = lo * s + o_last;
            f(Line {
                out: line * g.out[last] + lo as usize,
                inp: (inp * w + first) as usize,
                step: s as usize,
                len: (hi - lo) as usize,
            });
        }
        for i in (0..last).rev() {
            idx[i] += 1;
            if idx[i] < g.out[i] {
                break;
            }
            idx[i] = 0;
        }
    }
}
