//! Constant data that is shared, not copied. A model's weights are most of its bytes:
//! a [`Const`] is a cheap handle (an `Arc`) on them, so cloning a graph for a bucket, an
//! e-graph table or a plan's weight list never copies a weight. Its data stays where
//! the importer found it (little-endian bytes, usually a slice of the memory-mapped
//! model file) until something needs the elements: [`Const::tensor`] decodes once and
//! keeps the result (small constants the folder and the interpreter read), while
//! [`Const::write_le`] streams the bytes to an artifact or a device without keeping a
//! decoded copy. Casts, transposes, reshapes and concatenations of large constants (a
//! weight cast to bf16, the Q/K/V weights merged into one GEMM) are recorded as lazy
//! views of their sources ([`Const::cast`] and friends) and computed only when written,
//! one tensor at a time.

use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::tensor::{Elem, Tensor};
use crate::{map_tensor, with_tensor};
use bytes::Bytes;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use ndarray::{ArrayD, Axis, IxDyn};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// Constants of at most this many elements are decoded freely (shape inference and
/// folding read them); larger ones only by code that needs their elements.
pub const SMALL_ELEMENTS: usize = 1 << 16;

/// A shared, lazily decoded constant. Cloning is an `Arc` clone.
#[derive(Clone)]
pub struct Const(Arc<Inner>);

struct Inner {
    dtype: DType,
    shape: Vec<usize>,
    src: Source,
    dense: OnceLock<Tensor>,
}

/// Where the elements come from.
enum Source {
    /// Decoded already (`dense` is set).
    Dense,
    /// Little-endian elements, row-major, one byte per bool (ONNX `raw_data`).
    Raw(Bytes),
    /// The source converted with ONNX Cast semantics.
    Cast(Const),
    /// The source with its axes permuted.
    Transpose(Const, Vec<usize>),
    /// The source's elements in the same order, another shape.
    Reshape(Const),
    /// The sources joined along an axis.
    Concat(Vec<Const>, usize),
    /// The source zero-padded at the end of each axis.
    Pad(Const),
    /// The source through a transform named for reports (a rule's weight rewrite), with
    /// the parameters that make it this transform (a head size).
    Map(Const, &'static str, Vec<u64>, MapFn),
}

/// A lazy transform's function: the source tensor to the result.
type MapFn = Arc<dyn Fn(&Tensor) -> Tensor + Send + Sync>;

impl From<Tensor> for Const {
    fn from(t: Tensor) -> Const {
        let inner = Inner {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            src: Source::Dense,
            dense: OnceLock::from(t),
        };
        Const(Arc::new(inner))
    }
}

impl Const {
    fn lazy(dtype: DType, shape: Vec<usize>, src: Source) -> Const {
        Const(Arc::new(Inner {
            dtype,
            shape,
            src,
            dense: OnceLock::new(),
        }))
    }

    /// A constant over little-endian bytes (no copy: `bytes` may be a slice of a mapped
    /// file). The length must match the dtype and shape.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: Bytes) -> Result<Const> {
        let n = crate::budget::elements(&shape)
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .ok_or_else(|| IrError::Shape(format!("{dtype}{shape:?} overflows")))?;
        if bytes.len() as u64 != n {
            return Err(IrError::Shape(format!(
                "raw data has {} bytes, {dtype}{shape:?} needs {n}",
                bytes.len()
            )));
        }
        Ok(Const::lazy(dtype, shape, Source::Raw(bytes)))
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The concrete shape.
    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    /// Rank (number of dims).
    pub fn rank(&self) -> usize {
        self.0.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// True when the constant has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the data.
    pub fn byte_size(&self) -> usize {
        self.len() * self.0.dtype.size()
    }

    /// True for constants small enough to decode whenever asked ([`SMALL_ELEMENTS`]) or
    /// decoded already.
    pub fn is_small(&self) -> bool {
        self.len() <= SMALL_ELEMENTS || self.0.dense.get().is_some()
    }

    /// The decoded tensor, computed on first use and kept. For weights, prefer
    /// [`Const::write_le`], which keeps nothing.
    pub fn tensor(&self) -> &Tensor {
        self.0.dense.get_or_init(|| self.compute())
    }

    /// The decoded tensor, taken out of the handle when nothing else shares it (else
    /// a copy).
    pub fn into_tensor(self) -> Tensor {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => match inner.dense.into_inner() {
                Some(t) => t,
                None => Const(Arc::new(Inner {
                    dense: OnceLock::new(),
                    ..inner
                }))
                .compute(),
            },
            Err(shared) => Const(shared).tensor().clone(),
        }
    }

    /// The decoded tensor when it is small or decoded already (what shape inference and
    /// folding may read), else `None`.
    pub fn small(&self) -> Option<&Tensor> {
        self.is_small().then(|| self.tensor())
    }

    /// Whether two handles share their data (same import or same lazy view).
    pub fn ptr_eq(a: &Const, b: &Const) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// An address identifying the shared data (for de-duplication tables).
    pub fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// A lazy cast to `to` with ONNX Cast semantics (this constant when `to` is its
    /// dtype).
    pub fn cast(&self, to: DType) -> Const {
        if to == self.dtype() {
            return self.clone();
        }
        Const::lazy(to, self.0.shape.clone(), Source::Cast(self.clone()))
    }

    /// A lazy transpose by `perm` (a permutation of the axes, checked).
    pub fn transpose(&self, perm: &[usize]) -> Result<Const> {
        let r = self.0.shape.len();
        let mut seen = vec![false; r];
        for &p in perm {
            if p >= r || std::mem::replace(&mut seen[p], true) {
                return Err(IrError::Shape(format!(
                    "perm {perm:?} is not a permutation of {r} axes"
                )));
            }
        }
        if perm.len() != r {
            return Err(IrError::Shape(format!(
                "perm {perm:?} is not a permutation of {r} axes"
            )));
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(self.clone());
        }
        let shape = perm.iter().map(|&p| self.0.shape[p]).collect();
        Ok(Const::lazy(
            self.dtype(),
            shape,
            Source::Transpose(self.clone(), perm.to_vec()),
        ))
    }

    /// A lazy reshape to `shape` (same element count, checked).
    pub fn reshape(&self, shape: &[usize]) -> Result<Const> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(IrError::Shape(format!(
                "cannot reshape {:?} to {shape:?}",
                self.0.shape
            )));
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let src = match &self.0.src {
            Source::Reshape(s) => s.clone(),
            _ => self.clone(),
        };
        Ok(Const::lazy(
            self.dtype(),
            shape.to_vec(),
            Source::Reshape(src),
        ))
    }

    /// A lazy concatenation along `axis` (same dtype, rank and other dims, checked).
    pub fn concat(parts: &[Const], axis: usize) -> Result<Const> {
        let first = parts
            .first()
            .ok_or_else(|| IrError::Shape("concat of no constants".into()))?;
        let r = first.shape().len();
        if axis >= r {
            return Err(IrError::Shape(format!("concat axis {axis} of rank {r}")));
        }
        let mut shape = first.shape().to_vec();
        shape[axis] = 0;
        for p in parts {
            let same = p.dtype() == first.dtype()
                && p.shape().len() == r
                && (0..r).all(|i| i == axis || p.shape()[i] == first.shape()[i]);
            if !same {
                return Err(IrError::Shape(format!(
                    "concat of {}{:?} and {}{:?} on axis {axis}",
                    first.dtype(),
                    first.shape(),
                    p.dtype(),
                    p.shape()
                )));
            }
            shape[axis] += p.shape()[axis];
        }
        Ok(Const::lazy(
            first.dtype(),
            shape,
            Source::Concat(parts.to_vec(), axis),
        ))
    }

    /// The decoded tensor: borrowed when it is kept, else a temporary the caller drops.
    pub fn decoded(&self) -> std::borrow::Cow<'_, Tensor> {
        match self.0.dense.get() {
            Some(t) => std::borrow::Cow::Borrowed(t),
            None => std::borrow::Cow::Owned(self.compute()),
        }
    }

    /// A lazy zero padding at the end of each axis up to `shape` (same rank, each dim
    /// at least the source's, checked).
    pub fn pad_end(&self, shape: &[usize]) -> Result<Const> {
        if shape.len() != self.rank() || shape.iter().zip(self.shape()).any(|(n, s)| n < s) {
            return Err(IrError::Shape(format!(
                "cannot pad {:?} to {shape:?}",
                self.0.shape
            )));
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        Ok(Const::lazy(
            self.dtype(),
            shape.to_vec(),
            Source::Pad(self.clone()),
        ))
    }

    /// A lazy transform of this constant into one of `dtype` and `shape`: `f` runs when
    /// the data is needed (written, or decoded) and must return exactly that type.
    /// Optimizer rules that rewrite a weight (rotating its columns, folding a scale)
    /// record their rewrite this way instead of materializing a copy.
    /// `params` are what `f` depends on besides the data (two maps of one kind with
    /// equal parameters over the same source are the same constant, [`Const::recipe`]).
    pub fn map(
        &self,
        kind: &'static str,
        params: &[u64],
        dtype: DType,
        shape: Vec<usize>,
        f: impl Fn(&Tensor) -> Tensor + Send + Sync + 'static,
    ) -> Const {
        let src = Source::Map(self.clone(), kind, params.to_vec(), Arc::new(f));
        Const::lazy(dtype, shape, src)
    }

    /// A key two handles share exactly when their elements are computed the same way
    /// from the same shared data: a data leaf is its address (an imported weight's
    /// bytes, a decoded tensor), a lazy view its kind and parameters over its sources'
    /// keys. Buckets optimized apart make their own views of one weight (each casts it
    /// to bf16, merges Q/K/V); the weight store keeps one copy of those by this key.
    pub fn recipe(&self) -> Vec<u64> {
        let mut key = Vec::new();
        self.recipe_into(&mut key);
        key
    }

    fn recipe_into(&self, key: &mut Vec<u64>) {
        key.push(self.dtype() as u64);
        key.push(self.shape().len() as u64);
        key.extend(self.shape().iter().map(|&d| d as u64));
        match &self.0.src {
            Source::Dense => key.extend([0, self.addr() as u64]),
            Source::Raw(b) => key.extend([1, b.as_ptr() as u64, b.len() as u64]),
            Source::Cast(s) => {
                key.push(2);
                s.recipe_into(key);
            }
            Source::Transpose(s, perm) => {
                key.push(3);
                key.extend(perm.iter().map(|&p| p as u64));
                s.recipe_into(key);
            }
            Source::Reshape(s) => {
                key.push(4);
                s.recipe_into(key);
            }
            Source::Concat(parts, axis) => {
                key.extend([5, *axis as u64, parts.len() as u64]);
                parts.iter().for_each(|p| p.recipe_into(key));
            }
            Source::Pad(s) => {
                key.push(6);
                s.recipe_into(key);
            }
            Source::Map(s, kind, params, _) => {
                key.extend([7, kind.len() as u64]);
                key.extend(kind.bytes().map(u64::from));
                key.push(params.len() as u64);
                key.extend(params);
                s.recipe_into(key);
            }
        }
    }

    /// Runs `f` on the decoded tensor: the kept one when there is one, else a
    /// temporary that is dropped afterwards (nothing stays decoded).
    pub fn with_tensor<R>(&self, f: impl FnOnce(&Tensor) -> R) -> R {
        match self.0.dense.get() {
            Some(t) => f(t),
            None => f(&self.compute()),
        }
    }

    fn compute(&self) -> Tensor {
        let shape = &self.0.shape;
        match &self.0.src {
            Source::Dense => unreachable!("a dense constant is decoded at construction"),
            Source::Raw(b) => decode_le(self.0.dtype, shape, b),
            Source::Cast(s) => s.with_tensor(|t| t.cast(self.0.dtype)),
            Source::Transpose(s, perm) => s.with_tensor(|t| {
                map_tensor!(t, a => a.view().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned())
            }),
            Source::Reshape(s) => s.with_tensor(|t| {
                t.reshape(shape)
                    .expect("element count checked when the reshape was made")
            }),
            Source::Concat(parts, axis) => {
                let tensors: Vec<Tensor> = parts.iter().map(|p| p.with_tensor(Tensor::clone)).collect();
                concat_tensors(&tensors, *axis)
            }
            Source::Map(s, kind, _, f) => {
                let t = s.with_tensor(|t| f(t));
                assert!(
                    t.dtype() == self.0.dtype && t.shape() == shape.as_slice(),
                    "lazy `{kind}` made {}{:?}, declared {}{shape:?}",
                    t.dtype(),
                    t.shape(),
                    self.0.dtype
                );
                t
            }
            Source::Pad(s) => s.with_tensor(|t| {
                fn pad<T: Elem>(a: &ArrayD<T>, shape: &[usize]) -> ArrayD<T> {
                    let mut out = ArrayD::<T>::default(IxDyn(shape));
                    out.slice_each_axis_mut(|ax| ndarray::Slice::from(0..a.shape()[ax.axis.index()]))
                        .assign(a);
                    out
                }
                map_tensor!(t, a => pad(a, shape))
            }),
        }
    }

    /// Streams the data as little-endian bytes, row-major, one byte per bool, in
    /// pieces to `out`. Raw data is written as it lies; a cast of raw float data is
    /// converted in chunks; anything else is decoded into a temporary (one tensor's
    /// worth) that is dropped afterwards.
    pub fn write_le<E>(
        &self,
        out: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if let Some(t) = self.0.dense.get() {
            return write_tensor(t, out);
        }
        match &self.0.src {
            // ONNX bools are bytes, and a file may hold 2 for true: written as 0/1, as
            // the decoded tensor would be (kernels read the byte as a value).
            Source::Raw(b) if self.dtype() == DType::Bool && b.iter().any(|&x| x > 1) => {
                let norm: Vec<u8> = b.iter().map(|&x| u8::from(x != 0)).collect();
                out(&norm)
            }
            Source::Raw(b) => out(b),
            Source::Reshape(s) => s.write_le(out),
            // A matrix transposed (a GEMM weight stored `[N, K]`): its source's bytes
            // (a cast converted the fast way) moved in cache-sized blocks.
            Source::Transpose(s, perm) if perm[..] == [1, 0] => {
                let (rows, cols) = (s.shape()[0], s.shape()[1]);
                out(&transpose_bytes(
                    &s.to_le_bytes(),
                    rows,
                    cols,
                    self.dtype().size(),
                ))
            }
            Source::Cast(s) => match (s.dtype(), self.dtype()) {
                (DType::F32, DType::BF16) => {
                    narrow(s, out, |h: &mut [bf16], f| h.convert_from_f32_slice(f))
                }
                (DType::F32, DType::F16) => {
                    narrow(s, out, |h: &mut [f16], f| h.convert_from_f32_slice(f))
                }
                _ => write_tensor(&self.compute(), out),
            },
            _ => write_tensor(&self.compute(), out),
        }
    }

    /// The data as little-endian bytes (a copy; see [`Const::write_le`] to stream).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.byte_size());
        let _ = self.write_le::<std::convert::Infallible>(&mut |b| {
            v.extend_from_slice(b);
            Ok(())
        });
        v
    }

    /// A content fingerprint (FNV-1a, 64-bit words) that reads at most 64 KiB of any
    /// constant: raw data up to that size is hashed whole, larger raw data (a weight)
    /// by 16 evenly spaced 4 KiB blocks, and a lazy view hashes its recipe (kind and
    /// parameters) over its sources' fingerprints instead of computing its elements.
    /// Equal recipes over equal data agree; the same values reached two ways may not,
    /// and two large weights differing only between the sampled blocks collide. For
    /// elided constants in IR text, where reading every weight would cost seconds.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Fnv::default();
        h.eat(self.dtype() as u64);
        for &d in self.shape() {
            h.eat(d as u64);
        }
        if let Some(t) = self.0.dense.get() {
            return fingerprint_tensor(t);
        }
        match &self.0.src {
            Source::Dense => {}
            Source::Raw(b) => sampled(&mut h, b),
            Source::Cast(s) | Source::Reshape(s) | Source::Pad(s) => {
                h.eat(s.fingerprint());
                h.bytes(self.kind().as_bytes());
            }
            Source::Transpose(s, perm) => {
                h.eat(s.fingerprint());
                perm.iter().for_each(|&p| h.eat(p as u64));
            }
            Source::Concat(parts, axis) => {
                parts.iter().for_each(|p| h.eat(p.fingerprint()));
                h.eat(*axis as u64);
            }
            Source::Map(s, kind, params, _) => {
                h.eat(s.fingerprint());
                h.bytes(kind.as_bytes());
                params.iter().for_each(|&p| h.eat(p));
            }
        }
        h.finish()
    }

    /// What the constant is, for reports: `raw`, `dense` or the lazy view's kind.
    pub fn kind(&self) -> &'static str {
        if self.0.dense.get().is_some() {
            return "dense";
        }
        match &self.0.src {
            Source::Dense => "dense",
            Source::Raw(_) => "raw",
            Source::Cast(_) => "cast",
            Source::Transpose(..) => "transpose",
            Source::Reshape(_) => "reshape",
            Source::Concat(..) => "concat",
            Source::Pad(_) => "pad",
            Source::Map(_, kind, _, _) => kind,
        }
    }
}

/// The bytes of a row-major `rows x cols` matrix of `es`-byte elements, transposed.
fn transpose_bytes(src: &[u8], rows: usize, cols: usize, es: usize) -> Vec<u8> {
    const B: usize = 32;
    let mut dst = vec![0u8; src.len()];
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    let (from, to) = ((r * cols + c) * es, (c * rows + r) * es);
                    dst[to..to + es].copy_from_slice(&src[from..from + es]);
                }
            }
        }
    }
    dst
}

/// f32 elements (little-endian bytes, streamed by `src` in whole elements) written as
/// a 16-bit float type, 16 Ki elements at a time through `half`'s slice conversion.
fn narrow<E, H: Copy + Default>(
    src: &Const,
    out: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    convert: fn(&mut [H], &[f32]),
) -> std::result::Result<(), E> {
    const N: usize = 16 << 10;
    let mut f = vec![0f32; N];
    let mut h = vec![H::default(); N];
    let mut carry: Vec<u8> = Vec::new();
    src.write_le(&mut |mut b: &[u8]| {
        if !carry.is_empty() {
            let take = (4 - carry.len()).min(b.len());
            carry.extend_from_slice(&b[..take]);
            b = &b[take..];
            if carry.len() == 4 {
                let x = [f32::from_le_bytes([carry[0], carry[1], carry[2], carry[3]])];
                convert(&mut h[..1], &x);
                out(as_bytes(&h[..1]))?;
                carry.clear();
            }
        }
        let whole = b.len() / 4 * 4;
        carry.extend_from_slice(&b[whole..]);
        for chunk in b[..whole].chunks(4 * N) {
            let n = chunk.len() / 4;
            for (d, c) in f[..n].iter_mut().zip(chunk.chunks_exact(4)) {
                *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            convert(&mut h[..n], &f[..n]);
            out(as_bytes(&h[..n]))?;
        }
        Ok(())
    })
}

/// FNV-1a over 64-bit words (bytes are taken 8 at a time, the tail zero-padded).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf29ce484222325)
    }
}

impl Fnv {
    fn eat(&mut self, w: u64) {
        self.0 ^= w;
        self.0 = self.0.wrapping_mul(0x100000001b3);
    }

    fn bytes(&mut self, b: &[u8]) {
        let words = b.chunks_exact(8);
        let tail = words.remainder();
        for w in words {
            self.eat(u64::from_le_bytes([
                w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
            ]));
        }
        if !tail.is_empty() {
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            self.eat(u64::from_le_bytes(last));
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// [`Const::fingerprint`] of a decoded tensor (its dtype, shape and sampled bytes).
pub fn fingerprint_tensor(t: &Tensor) -> u64 {
    let mut h = Fnv::default();
    h.eat(t.dtype() as u64);
    for &d in t.shape() {
        h.eat(d as u64);
    }
    let _ = write_tensor::<std::convert::Infallible>(t, &mut |b| {
        sampled(&mut h, b);
        Ok(())
    });
    h.finish()
}

/// Hashes `b` whole up to 64 KiB, else 16 evenly spaced 4 KiB blocks and the length.
fn sampled(h: &mut Fnv, b: &[u8]) {
    const BLOCK: usize = 4 << 10;
    const BLOCKS: usize = 16;
    if b.len() <= BLOCK * BLOCKS {
        h.bytes(b);
        return;
    }
    let step = (b.len() - BLOCK) / (BLOCKS - 1);
    for i in 0..BLOCKS {
        h.bytes(&b[i * step..i * step + BLOCK]);
    }
    h.eat(b.len() as u64);
}

/// The bytes of a slice of plain numbers.
fn as_bytes<T: Copy>(s: &[T]) -> &[u8] {
    // SAFETY: only called with plain numeric types (f32, the 16-bit halves, `Elem`s),
    // little-endian on every target gopt supports, so their bytes are their values.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

fn write_tensor<E>(
    t: &Tensor,
    out: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    fn raw<T: Elem, E>(
        a: &ArrayD<T>,
        out: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let a = a.as_standard_layout();
        let s = a.as_slice().unwrap_or(&[]);
        // SAFETY: every `Elem` is a plain numeric type (bool is one byte, 0 or 1; the
        // halves are 16-bit patterns), little-endian on every target gopt supports, so
        // its bytes are its value.
        let bytes = unsafe {
            std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s))
        };
        out(bytes)
    }
    with_tensor!(t, a => raw(a, out))
}

fn concat_tensors(parts: &[Tensor], axis: usize) -> Tensor {
    fn cat<T: Elem>(parts: &[Tensor], axis: usize) -> Tensor {
        let views: Vec<_> = parts
            .iter()
            .map(|p| T::view(p).expect("concat parts share a dtype").view())
            .collect();
        T::wrap(ndarray::concatenate(Axis(axis), &views).expect("concat shapes checked"))
    }
    match parts[0].dtype() {
        DType::F32 => cat::<f32>(parts, axis),
        DType::F16 => cat::<f16>(parts, axis),
        DType::BF16 => cat::<bf16>(parts, axis),
        DType::F64 => cat::<f64>(parts, axis),
        DType::I8 => cat::<i8>(parts, axis),
        DType::I16 => cat::<i16>(parts, axis),
        DType::I32 => cat::<i32>(parts, axis),
        DType::I64 => cat::<i64>(parts, axis),
        DType::U8 => cat::<u8>(parts, axis),
        DType::U16 => cat::<u16>(parts, axis),
        DType::U32 => cat::<u32>(parts, axis),
        DType::U64 => cat::<u64>(parts, axis),
        DType::Bool => cat::<bool>(parts, axis),
    }
}

/// Decodes little-endian bytes whose length was checked against `dtype` and `shape`.
fn decode_le(dtype: DType, shape: &[usize], raw: &[u8]) -> Tensor {
    fn le<T: Elem, const W: usize>(
        shape: &[usize],
        raw: &[u8],
        f: impl Fn([u8; W]) -> T,
    ) -> Tensor {
        let v: Vec<T> = raw
            .chunks_exact(W)
            .map(|c| f(c.try_into().expect("chunk width")))
            .collect();
        T::wrap(ArrayD::from_shape_vec(IxDyn(shape), v).expect("length checked"))
    }
    match dtype {
        DType::F32 => le(shape, raw, f32::from_le_bytes),
        DType::F64 => le(shape, raw, f64::from_le_bytes),
        DType::F16 => le(shape, raw, |b| f16::from_bits(u16::from_le_bytes(b))),
        DType::BF16 => le(shape, raw, |b| bf16::from_bits(u16::from_le_bytes(b))),
        DType::I8 => le(shape, raw, i8::from_le_bytes),
        DType::I16 => le(shape, raw, i16::from_le_bytes),
        DType::I32 => le(shape, raw, i32::from_le_bytes),
        DType::I64 => le(shape, raw, i64::from_le_bytes),
        DType::U8 => le(shape, raw, u8::from_le_bytes),
        DType::U16 => le(shape, raw, u16::from_le_bytes),
        DType::U32 => le(shape, raw, u32::from_le_bytes),
        DType::U64 => le(shape, raw, u64::from_le_bytes),
        DType::Bool => le(shape, raw, |b: [u8; 1]| b[0] != 0),
    }
}

impl fmt::Debug for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.dense.get() {
            Some(t) if t.len() <= 16 => write!(f, "{t:?}"),
            _ => write!(
                f,
                "Const({} {}{:?})",
                self.kind(),
                self.dtype(),
                self.shape()
            ),
        }
    }
}

/// Equal when dtype, shape and elements are equal (decoding both: meant for tests and
/// small constants).
impl PartialEq for Const {
    fn eq(&self, other: &Const) -> bool {
        Const::ptr_eq(self, other)
            || (self.dtype() == other.dtype()
                && self.shape() == other.shape()
                && self.with_tensor(|a| other.with_tensor(|b| a == b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
    }

    fn le(v: &[f32]) -> Bytes {
        Bytes::from(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
    }

    #[test]
    fn raw_bytes_decode_and_stream_without_a_copy() {
        let c = Const::from_le_bytes(DType::F32, vec![2, 2], le(&[1.0, 2.0, 3.0, 4.0])).unwrap();
        assert_eq!(c.kind(), "raw");
        assert_eq!(c.to_le_bytes(), le(&[1.0, 2.0, 3.0, 4.0]).to_vec());
        assert_eq!(c.kind(), "raw", "streaming decodes nothing");
        assert_eq!(*c.tensor(), f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
        assert_eq!(c.kind(), "dense");
    }

    #[test]
    fn raw_bools_are_written_as_zero_or_one() {
        let c = Const::from_le_bytes(DType::Bool, vec![3], Bytes::from(vec![0u8, 2, 1])).unwrap();
        assert_eq!(c.to_le_bytes(), vec![0, 1, 1]);
    }

    #[test]
    fn wrong_length_is_an_error() {
        let e = Const::from_le_bytes(DType::F32, vec![3], le(&[1.0, 2.0])).unwrap_err();
        assert!(e.to_string().contains("needs 12"), "{e}");
    }

    #[test]
    fn lazy_views_match_the_interpreters_results() {
        let t = f32s(&[2, 3], &[1.0, -2.5, 3.0, 4.0, 5.0, 6.0]);
        let raw =
            Const::from_le_bytes(DType::F32, vec![2, 3], le(&[1.0, -2.5, 3.0, 4.0, 5.0, 6.0]))
                .unwrap();
        let cast = raw.cast(DType::BF16);
        assert_eq!(
            cast.to_le_bytes(),
            Const::from(t.cast(DType::BF16)).to_le_bytes()
        );
        assert_eq!(*cast.tensor(), t.cast(DType::BF16));
        let tr = raw.transpose(&[1, 0]).unwrap();
        assert_eq!(tr.shape(), &[3, 2]);
        assert_eq!(
            *tr.tensor(),
            f32s(&[3, 2], &[1.0, 4.0, -2.5, 5.0, 3.0, 6.0])
        );
        let cat = Const::concat(&[raw.clone(), raw.reshape(&[2, 3]).unwrap()], 1).unwrap();
        assert_eq!(cat.shape(), &[2, 6]);
        assert_eq!(
            cat.tensor().to_f64_vec(),
            vec![1.0, -2.5, 3.0, 1.0, -2.5, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]
        );
        assert!(raw.transpose(&[0, 0]).is_err());
        assert!(raw.reshape(&[5]).is_err());
        assert!(Const::concat(&[raw.clone(), tr], 1).is_err());
        let p = raw.pad_end(&[3, 4]).unwrap();
        assert_eq!(
            p.tensor().to_f64_vec(),
            vec![1.0, -2.5, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        assert!(raw.pad_end(&[1, 3]).is_err());
        assert_eq!(
            raw.kind(),
            "raw",
            "views decode their source only temporarily"
        );
    }
}
