//! GridSample, AffineGrid and RoiAlign, read once for every backend; each kernel runs
//! one thread per output element, as the interpreter (`gopt_ir::ops::image::grid` and
//! `roi`) computes it, in f32:
//!
//! - GridSample reads the image `[N, C, spatial...]` at the grid's normalized
//!   coordinates `[N, out spatial..., k]` (components x, y, (z): the spatial dims
//!   reversed). Each coordinate is denormalized in f32 (`align_corners` or not),
//!   rounded half to even for `nearest`, moved into the image by `border` (clamp) or
//!   `reflection` (folded into `[lo, hi]`, [`GridSampleSpec::bounds`]); then a separable
//!   filter of 1 (nearest), 2 (linear) or 4 (cubic, Keys' a = -0.75) taps per dim is
//!   applied, taps outside the image mapped by the padding rule (`zeros`: dropped).
//! - AffineGrid multiplies each `theta[n]` (`k` x `k + 1`) by the homogeneous base-grid
//!   point (x, y, (z), 1) of every output position. The output's spatial sizes are its
//!   shape's (the `size` input, constant once the graph is specialized).
//! - RoiAlign averages (or takes the max of) bilinear samples over each bin of each
//!   region of interest; the regions' batch indices are read on the device and checked
//!   ([`RoiAlignSpec::check`]): one outside the batch fails the run.

use super::support::{check_float, input, output, plan, typed, unsupported, Site};
use crate::plan::{index_code, IndexCheck};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// Which sampling op a node is, as [`super::lower`] maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleOp {
    /// GridSample.
    Grid,
    /// AffineGrid.
    Affine,
    /// RoiAlign.
    Roi,
}

/// A sampling node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleSpec {
    /// GridSample.
    Grid(GridSampleSpec),
    /// AffineGrid.
    Affine(AffineGridSpec),
    /// RoiAlign.
    Roi(RoiAlignSpec),
}

/// GridSample's interpolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interp {
    /// The nearest sample (coordinates rounded half to even).
    Nearest,
    /// Linear in each dim.
    Linear,
    /// Keys cubic convolution in each dim (a = -0.75).
    Cubic,
}

impl Interp {
    /// Taps per dim.
    pub fn taps(self) -> usize {
        match self {
            Interp::Nearest => 1,
            Interp::Linear => 2,
            Interp::Cubic => 4,
        }
    }

    /// The attribute's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Interp::Nearest => "nearest",
            Interp::Linear => "linear",
            Interp::Cubic => "cubic",
        }
    }
}

/// GridSample's rule for coordinates and taps outside the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Taps outside read zero.
    Zeros,
    /// Clamped to the edge.
    Border,
    /// Folded back at the borders.
    Reflection,
}

impl Padding {
    /// The attribute's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Padding::Zeros => "zeros",
            Padding::Border => "border",
            Padding::Reflection => "reflection",
        }
    }
}

/// A GridSample node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct GridSampleSpec {
    /// The node.
    pub site: Site,
    /// The image `[N, C, spatial...]`.
    pub x: ValueId,
    /// The grid `[N, out spatial..., k]`.
    pub grid: ValueId,
    /// The output `[N, C, out spatial...]`.
    pub out: ValueId,
    /// The image's (and output's) dtype, a float.
    pub dtype: DType,
    /// The grid's dtype, a float.
    pub grid_dtype: DType,
    /// The interpolation.
    pub interp: Interp,
    /// The padding rule.
    pub padding: Padding,
    /// `align_corners`: -1 and 1 are the centers of the corner samples (else their
    /// outer edges).
    pub align: bool,
    /// Channels.
    pub c: usize,
    /// The image's spatial dims (`k` of them, each at least 1).
    pub dims: Vec<usize>,
    /// Output points per (batch, channel): the grid's spatial dims' product.
    pub points: usize,
    /// Output elements (at least 1).
    pub n: usize,
    /// The image's elements.
    pub x_len: usize,
    /// The grid's elements.
    pub grid_len: usize,
}

impl GridSampleSpec {
    /// Spatial dims (`k`, the grid's last dim).
    pub fn k(&self) -> usize {
        self.dims.len()
    }

    /// Elements of one image plane.
    pub fn plane(&self) -> usize {
        self.dims.iter().product()
    }

    /// The image's stride along spatial dim `i`.
    pub fn stride(&self, i: usize) -> usize {
        self.dims[i + 1..].iter().product()
    }

    /// The range `[lo, hi]` coordinates along spatial dim `i` are reflected into:
    /// the corner samples' centers with `align_corners`, their outer edges without.
    pub fn bounds(&self, i: usize) -> (f32, f32) {
        let d = self.dims[i] as f32;
        if self.align {
            (0.0, d - 1.0)
        } else {
            (-0.5, d - 0.5)
        }
    }
}

/// An AffineGrid node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineGridSpec {
    /// The node.
    pub site: Site,
    /// The matrices `[N, k, k + 1]`.
    pub theta: ValueId,
    /// The grid `[N, spatial..., k]`.
    pub out: ValueId,
    /// Their dtype, a float.
    pub dtype: DType,
    /// `align_corners`: the base grid runs from -1 to 1 through the corner samples'
    /// centers (else through their outer edges).
    pub align: bool,
    /// The output's spatial dims (`k` of them, 2 or 3).
    pub sizes: Vec<usize>,
    /// Output elements (at least 1).
    pub n: usize,
}

impl AffineGridSpec {
    /// Spatial dims.
    pub fn k(&self) -> usize {
        self.sizes.len()
    }

    /// Points per matrix.
    pub fn points(&self) -> usize {
        self.sizes.iter().product()
    }

    /// Base-grid coordinate `i` along a dim of `size` samples as `(num, den)`: the
    /// coordinate is `num / den`, both exact small integers, so one f32 division
    /// rounds it once (`-1 + (2i + 1) / size`, or `-1 + 2i / (size - 1)` aligned; -1
    /// for one aligned sample).
    pub fn base(&self, size: usize) -> BaseGrid {
        match (self.align, size) {
            (true, 0 | 1) => BaseGrid {
                scale: 0,
                offset: -1,
                den: 1,
            },
            (true, s) => BaseGrid {
                scale: 2,
                offset: -(s as i64 - 1),
                den: s as i64 - 1,
            },
            (false, s) => BaseGrid {
                scale: 2,
                offset: 1 - s as i64,
                den: (s as i64).max(1),
            },
        }
    }
}

/// The base grid of one dim: coordinate `i` is `(scale * i + offset) / den`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseGrid {
    /// Multiplies the index.
    pub scale: i64,
    /// Added to it.
    pub offset: i64,
    /// Divides the sum.
    pub den: i64,
}

/// A RoiAlign node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RoiAlignSpec {
    /// The node.
    pub site: Site,
    /// The check of the regions' batch indices.
    pub check: IndexCheck,
    /// The image `[N, C, H, W]`.
    pub x: ValueId,
    /// The regions `[R, 4]` (x1, y1, x2, y2).
    pub rois: ValueId,
    /// Their batch indices `[R]`.
    pub batch: ValueId,
    /// The output `[R, C, output_height, output_width]`.
    pub out: ValueId,
    /// The image's (and output's) dtype, a float.
    pub dtype: DType,
    /// The regions' dtype, a float.
    pub rois_dtype: DType,
    /// The batch indices' dtype (i32 or i64).
    pub batch_dtype: DType,
    /// `mode` max (else avg).
    pub max: bool,
    /// `coordinate_transformation_mode` half_pixel (shifts by half a pixel; else
    /// output_half_pixel, whose regions are at least one pixel).
    pub half_pixel: bool,
    /// `sampling_ratio`: samples per bin along each dim (0 or less: as many as the
    /// bin is pixels long, rounded up).
    pub ratio: i64,
    /// `spatial_scale`.
    pub scale: f32,
    /// Batch.
    pub batch_len: usize,
    /// Channels.
    pub c: usize,
    /// Image rows.
    pub h: usize,
    /// Image columns.
    pub w: usize,
    /// Output rows per region.
    pub ph: usize,
    /// Output columns per region.
    pub pw: usize,
    /// Output elements (at least 1).
    pub n: usize,
}

impl RoiAlignSpec {
    /// The image's elements.
    pub fn x_len(&self) -> usize {
        self.batch_len * self.c * self.h * self.w
    }
}

/// Reads sampling node `node` (of op `op`) of `g`.
pub fn spec(g: &Graph, node: &Node, op: SampleOp) -> Result<SampleSpec> {
    match op {
        SampleOp::Grid => grid_sample(g, node).map(SampleSpec::Grid),
        SampleOp::Affine => affine_grid(g, node).map(SampleSpec::Affine),
        SampleOp::Roi => roi_align(g, node).map(SampleSpec::Roi),
    }
}

/// Reads GridSample node `node` of `g`.
fn grid_sample(g: &Graph, node: &Node) -> Result<GridSampleSpec> {
    let (x, grid, out) = (input(node, 0)?, input(node, 1)?, output(node, 0)?);
    let (dtype, xs) = typed(g, node, x)?;
    let (grid_dtype, gs) = typed(g, node, grid)?;
    check_float(node, dtype, "data")?;
    check_float(node, grid_dtype, "grids")?;
    let a = &node.attrs;
    let interp = match a.str_or("mode", "linear").map_err(plan)? {
        "nearest" => Interp::Nearest,
        "linear" | "bilinear" => Interp::Linear,
        "cubic" | "bicubic" => Interp::Cubic,
        m => return Err(unsupported(node, &format!("mode `{m}`"))),
    };
    let padding = match a.str_or("padding_mode", "zeros").map_err(plan)? {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        m => return Err(unsupported(node, &format!("padding_mode `{m}`"))),
    };
    let align = a.int_or("align_corners", 0).map_err(plan)? != 0;
    let k = xs.len().saturating_sub(2);
    if xs.len() < 3 || gs.len() != xs.len() || gs[0] != xs[0] || gs[gs.len() - 1] != k {
        return Err(plan(format!(
            "GridSample `{}`: X {xs:?} and grid {gs:?} do not fit",
            node.name
        )));
    }
    let dims = xs[2..].to_vec();
    let points: usize = gs[1..gs.len() - 1].iter().product();
    let n = xs[0] * xs[1] * points;
    if n == 0 || dims.contains(&0) {
        return Err(unsupported(node, "an empty tensor"));
    }
    if xs.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported(node, "an image of 2^31 elements or more"));
    }
    Ok(GridSampleSpec {
        site: Site::of(node),
        x,
        grid,
        out,
        dtype,
        grid_dtype,
        interp,
        padding,
        align,
        c: xs[1],
        dims,
        points,
        n,
        x_len: xs.iter().product(),
        grid_len: gs.iter().product(),
    })
}

/// Reads AffineGrid node `node` of `g`.
fn affine_grid(g: &Graph, node: &Node) -> Result<AffineGridSpec> {
    let (theta, out) = (input(node, 0)?, output(node, 0)?);
    let (dtype, ts) = typed(g, node, theta)?;
    let (_, os) = typed(g, node, out)?;
    check_float(node, dtype, "matrices")?;
    let align = node.attrs.int_or("align_corners", 0).map_err(plan)? != 0;
    let k = os.len().saturating_sub(2);
    if !(k == 2 || k == 3) || ts.len() != 3 || ts[1] != k || ts[2] != k + 1 {
        return Err(unsupported(
            node,
            &format!("theta {ts:?} for a grid {os:?} (2 or 3 spatial dims)"),
        ));
    }
    if os[0] != ts[0] || os[k + 1] != k {
        return Err(plan(format!(
            "AffineGrid `{}`: theta {ts:?} does not fit the grid {os:?}",
            node.name
        )));
    }
    let n: usize = os.iter().product();
    if n == 0 {
        return Err(unsupported(node, "an empty grid"));
    }
    if os[1..k + 1].iter().any(|&s| s >= 1 << 22) {
        return Err(unsupported(node, "a grid dim of 2^22 samples or more"));
    }
    Ok(AffineGridSpec {
        site: Site::of(node),
        theta,
        out,
        dtype,
        align,
        sizes: os[1..=k].to_vec(),
        n,
    })
}

/// Reads RoiAlign node `node` of `g`.
fn roi_align(g: &Graph, node: &Node) -> Result<RoiAlignSpec> {
    let (x, rois, batch) = (input(node, 0)?, input(node, 1)?, input(node, 2)?);
    let out = output(node, 0)?;
    let (dtype, xs) = typed(g, node, x)?;
    let (rois_dtype, rs) = typed(g, node, rois)?;
    let (batch_dtype, bs) = typed(g, node, batch)?;
    let (_, os) = typed(g, node, out)?;
    check_float(node, dtype, "data")?;
    check_float(node, rois_dtype, "regions")?;
    if !matches!(batch_dtype, DType::I32 | DType::I64) {
        return Err(unsupported(node, &format!("{batch_dtype} batch indices")));
    }
    let a = &node.attrs;
    let half_pixel = match a
        .str_or("coordinate_transformation_mode", "half_pixel")
        .map_err(plan)?
    {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => {
            return Err(unsupported(
                node,
                &format!("coordinate_transformation_mode `{m}`"),
            ))
        }
    };
    let max = match a.str_or("mode", "avg").map_err(plan)? {
        "avg" => false,
        "max" => true,
        m => return Err(unsupported(node, &format!("mode `{m}`"))),
    };
    let ratio = a.int_or("sampling_ratio", 0).map_err(plan)?;
    let scale = a.float_or("spatial_scale", 1.0).map_err(plan)?;
    if xs.len() != 4 || rs.len() != 2 || rs[1] != 4 || bs != [rs[0]] || os.len() != 4 {
        return Err(plan(format!(
            "RoiAlign `{}`: X {xs:?}, rois {rs:?}, batch_indices {bs:?} do not fit",
            node.name
        )));
    }
    let n: usize = os.iter().product();
    if n == 0 || xs.contains(&0) {
        return Err(unsupported(node, "an empty tensor"));
    }
    if xs.iter().product::<usize>() >= 1 << 31 {
        return Err(unsupported(node, "an image of 2^31 elements or more"));
    }
    if ratio > 1 << 16 {
        return Err(unsupported(node, "a sampling_ratio above 2^16"));
    }
    Ok(RoiAlignSpec {
        site: Site::of(node),
        check: IndexCheck {
            code: index_code(g, node)?,
            op: node.op.name().into(),
            what: format!("a batch index outside the batch of {}", xs[0]),
        },
        x,
        rois,
        batch,
        out,
        dtype,
        rois_dtype,
        batch_dtype,
        max,
        half_pixel,
        ratio,
        scale,
        batch_len: xs[0],
        c: xs[1],
        h: xs[2],
        w: xs[3],
        ph: os[2],
        pw: os[3],
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affine(align: bool) -> AffineGridSpec {
        AffineGridSpec {
            site: Site {
                node: "affine".into(),
                op: "AffineGrid",
                inputs: vec![Some(0)],
                outputs: vec![1],
            },
            theta: ValueId(0),
            out: ValueId(1),
            dtype: DType::F32,
            align,
            sizes: vec![3, 4],
            n: 24,
        }
    }

    /// The base grid's coordinates as the interpreter's `base_coords` gives them.
    #[test]
    fn base_grid_matches_the_interpreter() {
        for align in [false, true] {
            for size in 1..6usize {
                let b = affine(align).base(size);
                for i in 0..size {
                    let want = if align {
                        if size == 1 {
                            -1.0
                        } else {
                            -1.0 + i as f64 * 2.0 / (size as f64 - 1.0)
                        }
                    } else {
                        -1.0 + 1.0 / size as f64 + i as f64 * 2.0 / size as f64
                    };
                    let got = (b.scale * i as i64 + b.offset) as f64 / b.den as f64;
                    assert!(
                        (got - want).abs() < 1e-12,
                        "{align} {size} {i}: {got} {want}"
                    );
                }
            }
        }
    }
}
