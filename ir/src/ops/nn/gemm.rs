//! The matrix-product kernel every heavy op of the family runs on (MatMul, Gemm, Conv,
//! ConvTranspose, Einsum): `matrixmultiply`'s sgemm/dgemm for f32/f64, split across
//! rayon threads by rows or columns of the result, and a plain loop with wrapping
//! arithmetic for integers. Half-precision floats are widened to f32 by their callers
//! ([`Real::widen`]) and rounded back once at the end ([`Real::narrow`]).
//!
//! All `unsafe` of the family lives here: the safe entry point [`gemm`] checks that
//! every matrix it is given fits its slice before handing raw pointers to the kernels.

use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::tensor::{Elem, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, CowArray, IxDyn};
use rayon::prelude::*;

/// Products smaller than this many multiply-adds run on the calling thread.
const PAR_MIN_WORK: usize = 1 << 18;
/// Smallest row block worth a thread of its own.
const MIN_ROWS_PER_TASK: usize = 16;
/// Smallest column block worth a thread of its own.
const MIN_COLS_PER_TASK: usize = 64;

/// Products with at most this many rows stream `B` once per column block instead of
/// packing it (matrix-vector products: decoding steps, classifier heads).
const SMALL_M: usize = 4;
/// Columns of one block of the small-`m` path (its accumulators stay in L1).
const SMALL_M_BLOCK: usize = 512;

/// A read-only strided matrix: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<'a, T> {
    /// Backing storage; the matrix starts at its first element.
    pub data: &'a [T],
    /// Row stride in elements.
    pub rs: usize,
    /// Column stride in elements.
    pub cs: usize,
}

impl<'a, T> Mat<'a, T> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [T], cols: usize) -> Self {
        Mat {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose (a view, nothing moves).
    pub fn t(self) -> Self {
        Mat {
            data: self.data,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// True when a `rows x cols` matrix with these strides lies inside `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// Element types with a matrix-product kernel.
pub(crate) trait MatElem: Elem {
    /// The additive identity.
    const ZERO: Self;
    /// The multiplicative identity.
    const ONE: Self;

    /// `acc + a * b` (wrapping for integers).
    fn madd(acc: Self, a: Self, b: Self) -> Self;

    /// `a + b` (wrapping for integers).
    fn wadd(a: Self, b: Self) -> Self;

    /// `C = alpha * A * B + beta * C` on raw strided matrices, on the calling thread.
    ///
    /// # Safety
    /// `a` must address an `m x k` matrix, `b` a `k x n` matrix and `c` an `m x n`
    /// matrix with the given strides, all in bounds; `c` must not alias `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: (*const Self, usize, usize),
        b: (*const Self, usize, usize),
        beta: Self,
        c: (*mut Self, usize, usize),
    );
}

macro_rules! impl_mat_float {
    ($t:ty, $gemm:path) => {
        impl MatElem for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn madd(acc: Self, a: Self, b: Self) -> Self {
                acc + a * b
            }
            fn wadd(a: Self, b: Self) -> Self {
                a + b
            }
            unsafe fn kernel(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: (*const Self, usize, usize),
                b: (*const Self, usize, usize),
                beta: Self,
                c: (*mut Self, usize, usize),
            ) {
                // SAFETY: forwarded from the caller's contract; strides fit in isize
                // because they index allocated slices.
                unsafe {
                    $gemm(
                        m,
                        k,
                        n,
                        alpha,
                        a.0,
                        a.1 as isize,
                        a.2 as isize,
                        b.0,
                        b.1 as isize,
                        b.2 as isize,
                        beta,
                        c.0,
                        c.1 as isize,
                        c.2 as isize,
                    )
                }
            }
        }
    };
}
impl_mat_float!(f32, matrixmultiply::sgemm);
impl_mat_float!(f64, matrixmultiply::dgemm);

macro_rules! impl_mat_int {
    ($t:ty) => {
        impl MatElem for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn madd(acc: Self, a: Self, b: Self) -> Self {
                acc.wrapping_add(a.wrapping_mul(b))
            }
            fn wadd(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            unsafe fn kernel(
                m: usize,
                k: usize,
                n: usize,
                alpha: Self,
                a: (*const Self, usize, usize),
                b: (*const Self, usize, usize),
                beta: Self,
                c: (*mut Self, usize, usize),
            ) {
                for i in 0..m {
                    for j in 0..n {
                        let mut acc: Self = 0;
                        for p in 0..k {
                            // SAFETY: (i, p) and (p, j) are inside the matrices the
                            // caller vouched for.
                            let (x, y) = unsafe {
                                (*a.0.add(i * a.1 + p * a.2), *b.0.add(p * b.1 + j * b.2))
                            };
                            acc = Self::madd(acc, x, y);
                        }
                        // SAFETY: (i, j) is inside `c`.
                        let cij = unsafe { &mut *c.0.add(i * c.1 + j * c.2) };
                        let old = if beta == 0 { 0 } else { cij.wrapping_mul(beta) };
                        *cij = old.wrapping_add(acc.wrapping_mul(alpha));
                    }
                }
            }
        }
    };
}
impl_mat_int!(i32);
impl_mat_int!(i64);
impl_mat_int!(u32);
impl_mat_int!(u64);

/// A raw pointer that may cross threads: each task writes a disjoint block through it.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: only used to hand disjoint column blocks of one buffer to rayon tasks.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above; no two tasks touch the same element.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    fn get(self) -> *mut T {
        self.0
    }
}

/// `C = alpha * A * B + beta * C` where `A` is `m x k`, `B` is `k x n` and `C` is the
/// row-major `m x n` matrix in `c`. With `beta == 0`, `c`'s previous content is
/// ignored. Large products are split across threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: MatElem>(
    m: usize,
    k: usize,
    n: usize,
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: &mut [T],
) {
    assert!(
        a.fits(m, k) && b.fits(k, n) && c.len() >= m * n,
        "gemm operands do not fit their buffers"
    );
    if m == 0 || n == 0 {
        return;
    }
    let c = &mut c[..m * n];
    if k == 0 {
        if beta == T::ZERO {
            c.fill(T::ZERO);
        } else {
            c.iter_mut().for_each(|v| *v = T::madd(T::ZERO, *v, beta));
        }
        return;
    }
    if m <= SMALL_M && (b.cs == 1 || b.rs == 1) {
        small_m(m, k, n, alpha, a, b, beta, c);
        return;
    }
    let threads = rayon::current_num_threads();
    let work = m.saturating_mul(n).saturating_mul(k);
    if threads > 1 && work >= PAR_MIN_WORK && m >= 2 * MIN_ROWS_PER_TASK {
        let rows = m.div_ceil(threads).max(MIN_ROWS_PER_TASK);
        c.par_chunks_mut(rows * n).enumerate().for_each(|(i, cb)| {
            let r0 = i * rows;
            let mb = cb.len() / n;
            // SAFETY: rows r0..r0+mb of `a` are in bounds (checked above for all m
            // rows), `cb` is exactly that block of `c`.
            unsafe {
                T::kernel(
                    mb,
                    k,
                    n,
                    alpha,
                    (a.data.as_ptr().add(r0 * a.rs), a.rs, a.cs),
                    (b.data.as_ptr(), b.rs, b.cs),
                    beta,
                    (cb.as_mut_ptr(), n, 1),
                )
            }
        });
    } else if threads > 1 && work >= PAR_MIN_WORK && n >= 2 * MIN_COLS_PER_TASK {
        let cols = n.div_ceil(threads).max(MIN_COLS_PER_TASK);
        let blocks = n.div_ceil(cols);
        let cp = SendPtr(c.as_mut_ptr());
        (0..blocks).into_par_iter().for_each(|j| {
            let j0 = j * cols;
            let nb = cols.min(n - j0);
            // SAFETY: columns j0..j0+nb of `b` and `c` are in bounds; the column
            // blocks of different tasks are disjoint.
            unsafe {
                T::kernel(
                    m,
                    k,
                    nb,
                    alpha,
                    (a.data.as_ptr(), a.rs, a.cs),
                    (b.data.as_ptr().add(j0 * b.cs), b.rs, b.cs),
                    beta,
                    (cp.get().add(j0), n, 1),
                )
            }
        });
    } else {
        // SAFETY: bounds checked above; `c` is a distinct mutable buffer.
        unsafe {
            T::kernel(
                m,
                k,
                n,
                alpha,
                (a.data.as_ptr(), a.rs, a.cs),
                (b.data.as_ptr(), b.rs, b.cs),
                beta,
                (c.as_mut_ptr(), n, 1),
            )
        }
    }
}

/// Float types the family computes in: f32 (also for f16/bf16 data) and f64.
pub(crate) trait Real: MatElem + num_traits::Float + std::iter::Sum {
    /// Borrows (f32 data as f32, f64 as f64) or widens (f16/bf16 to f32) a float tensor.
    fn widen(t: &Tensor) -> Result<CowArray<'_, Self, IxDyn>>;
    /// Rounds a result back to `dtype` (the dtype the inputs had).
    fn narrow(a: ArrayD<Self>, dtype: DType) -> Tensor;
    /// Converts from f64 (rounding to nearest).
    fn of(v: f64) -> Self {
        <Self as Elem>::from_f64(v)
    }
}

impl Real for f32 {
    fn widen(t: &Tensor) -> Result<CowArray<'_, f32, IxDyn>> {
        match t {
            Tensor::F32(a) => Ok(a.view().into()),
            Tensor::F16(a) => Ok(a.mapv(f16::to_f32).into()),
            Tensor::BF16(a) => Ok(a.mapv(bf16::to_f32).into()),
            other => Err(IrError::DType {
                context: "float input".into(),
                expected: "f32, f16 or bf16".into(),
                found: other.dtype(),
            }),
        }
    }
    fn narrow(a: ArrayD<f32>, dtype: DType) -> Tensor {
        match dtype {
            DType::F16 => Tensor::F16(a.mapv(f16::from_f32)),
            DType::BF16 => Tensor::BF16(a.mapv(bf16::from_f32)),
            _ => Tensor::F32(a),
        }
    }
}

impl Real for f64 {
    fn widen(t: &Tensor) -> Result<CowArray<'_, f64, IxDyn>> {
        match t {
            Tensor::F64(a) => Ok(a.view().into()),
            other => Err(IrError::DType {
                context: "float input".into(),
                expected: "f64".into(),
                found: other.dtype(),
            }),
        }
    }
    fn narrow(a: ArrayD<f64>, _dtype: DType) -> Tensor {
        Tensor::F64(a)
    }
}

/// Runs `f32f` for f32/f16/bf16 dtypes and `f64f` for f64; other dtypes are
/// unsupported by `op`.
pub(crate) fn by_precision<T>(
    dtype: DType,
    op: &str,
    f32f: impl FnOnce() -> Result<T>,
    f64f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => f32f(),
        DType::F64 => f64f(),
        d => Err(IrError::Unsupported(format!(
            "{op} on {d} (float types only)"
        ))),
    }
}

/// `C = alpha * A * B + beta * C` for few rows of `A`: each column block of `C` is
/// accumulated from rows of `B` (when `B`'s rows are contiguous) or from dot products
/// (when its columns are), blocks in parallel.
#[allow(clippy::too_many_arguments)]
fn small_m<T: MatElem>(
    m: usize,
    k: usize,
    n: usize,
    alpha: T,
    a: Mat<T>,
    b: Mat<T>,
    beta: T,
    c: &mut [T],
) {
    let blocks: Vec<usize> = (0..n).step_by(SMALL_M_BLOCK).collect();
    let work = m * n * k;
    let block = |&j0: &usize| -> Vec<T> {
        let nb = SMALL_M_BLOCK.min(n - j0);
        let mut acc = vec![T::ZERO; m * nb];
        if b.cs == 1 {
            // One pass over this block of B's rows, feeding every row of the result.
            for p in 0..k {
                let src = &b.data[p * b.rs + j0..][..nb];
                for (i, row) in acc.chunks_mut(nb).enumerate() {
                    let x = a.data[i * a.rs + p * a.cs];
                    for (o, &y) in row.iter_mut().zip(src) {
                        *o = T::madd(*o, x, y);
                    }
                }
            }
        } else {
            for (i, row) in acc.chunks_mut(nb).enumerate() {
                for (j, o) in row.iter_mut().enumerate() {
                    let col = &b.data[(j0 + j) * b.cs..][..(k - 1) * b.rs + 1];
                    *o = dot(&a, i, col, b.rs, k);
                }
            }
        }
        acc
    };
    let parts: Vec<Vec<T>> = if work >= PAR_MIN_WORK {
        blocks.par_iter().map(block).collect()
    } else {
        blocks.iter().map(block).collect()
    };
    for (&j0, part) in blocks.iter().zip(&parts) {
        let nb = part.len() / m;
        for i in 0..m {
            for (j, &v) in part[i * nb..][..nb].iter().enumerate() {
                let cij = &mut c[i * n + j0 + j];
                let old = if beta == T::ZERO {
                    T::ZERO
                } else {
                    T::madd(T::ZERO, *cij, beta)
                };
                *cij = T::madd(old, alpha, v);
            }
        }
    }
}

/// Row `i` of `a` dotted with the `k` values `col[0], col[step], ...`, with eight
/// partial sums so that floats vectorize.
fn dot<T: MatElem>(a: &Mat<T>, i: usize, col: &[T], step: usize, k: usize) -> T {
    let mut part = [T::ZERO; 8];
    if a.cs == 1 && step == 1 {
        let x = &a.data[i * a.rs..][..k];
        let y = &col[..k];
        let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
        let (xr, yr) = (xc.remainder(), yc.remainder());
        for (xs, ys) in xc.zip(yc) {
            for l in 0..8 {
                part[l] = T::madd(part[l], xs[l], ys[l]);
            }
        }
        for (&u, &v) in xr.iter().zip(yr) {
            part[0] = T::madd(part[0], u, v);
        }
    } else {
        for p in 0..k {
            part[p % 8] = T::madd(part[p % 8], a.data[i * a.rs + p * a.cs], col[p * step]);
        }
    }
    part.iter().fold(T::ZERO, |s, &v| T::wadd(s, v))
}
