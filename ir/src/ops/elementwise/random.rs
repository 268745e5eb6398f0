//! Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli and
//! Multinomial. They draw from a small xoshiro256** generator seeded by the `seed`
//! attribute when given (so a seeded node repeats its draws) and from fresh entropy
//! otherwise. The streams are not numpy's: only distributions can be checked.

use super::kernel::map;
use crate::dtype::DType;
use crate::error::{shape_err, unsupported, IrError, Result};
use crate::graph::Node;
use crate::tensor::{array_from, Tensor};
use std::hash::{BuildHasher, Hasher};

/// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    /// From the node's `seed` attribute (a float in ONNX), or from fresh entropy.
    fn for_node(node: &Node) -> Result<Rng> {
        let seed = match node.attrs.float("seed")? {
            Some(s) => s.to_bits() as u64,
            None => {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(0x5eed);
                h.finish()
            }
        };
        Ok(Rng::new(seed))
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform(); // in (0, 1], so the log is finite
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// The output dtype: the `dtype` attribute, else `default`; it must be a float type.
fn float_dtype(node: &Node, default: DType) -> Result<DType> {
    let d = node.attrs.dtype("dtype")?.unwrap_or(default);
    if !d.is_float() {
        return unsupported(format!("{} with dtype {d} (takes a float type)", node.op));
    }
    Ok(d)
}

/// The output shape: `like`'s, or the required `shape` attribute.
fn out_shape(node: &Node, like: Option<&Tensor>) -> Result<Vec<usize>> {
    if let Some(t) = like {
        return Ok(t.shape().to_vec());
    }
    let dims = node.attrs.ints("shape")?.ok_or_else(|| IrError::Attr {
        name: "shape".into(),
        msg: "required but missing".into(),
    })?;
    dims.iter()
        .map(|&d| usize::try_from(d).or_else(|_| shape_err(format!("negative dim {d} in `shape`"))))
        .collect()
}

fn sample(
    node: &Node,
    like: Option<&Tensor>,
    mut draw: impl FnMut(&mut Rng) -> f64,
) -> Result<Tensor> {
    let shape = out_shape(node, like)?;
    let dtype = float_dtype(node, like.map_or(DType::F32, Tensor::dtype))?;
    let mut rng = Rng::for_node(node)?;
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| draw(&mut rng)).collect();
    Ok(Tensor::F64(array_from(&shape, v)?).cast(dtype))
}

/// RandomUniform (no `like`) or RandomUniformLike: uniform in `[low, high)`.
pub(crate) fn uniform(node: &Node, like: Option<&Tensor>) -> Result<Tensor> {
    let low = node.attrs.float_or("low", 0.0)? as f64;
    let high = node.attrs.float_or("high", 1.0)? as f64;
    sample(node, like, |r| low + (high - low) * r.uniform())
}

/// RandomNormal (no `like`) or RandomNormalLike: normal with `mean` and `scale`.
pub(crate) fn normal(node: &Node, like: Option<&Tensor>) -> Result<Tensor> {
    let mean = node.attrs.float_or("mean", 0.0)? as f64;
    let scale = node.attrs.float_or("scale", 1.0)? as f64;
    sample(node, like, |r| mean + scale * r.normal())
}

/// 1 with probability `p` (each element of `p`), else 0, in the `dtype` attribute's
/// type (default: `p`'s).
pub(crate) fn bernoulli(node: &Node, p: &Tensor) -> Result<Tensor> {
    let dtype = node.attrs.dtype("dtype")?.unwrap_or(p.dtype());
    let mut rng = Rng::for_node(node)?;
    let probs = p.cast(DType::F64);
    let Tensor::F64(pa) = &probs else {
        return Err(IrError::Invalid("cast to f64 gave another dtype".into()));
    };
    let draws: Vec<f64> = pa
        .iter()
        .map(|&q| if rng.uniform() < q { 1.0 } else { 0.0 })
        .collect();
    Ok(Tensor::F64(array_from(pa.shape(), draws)?).cast(dtype))
}

/// Multinomial: `sample_size` class indices per row of a `[batch, classes]` tensor of
/// unnormalised log-probabilities, as int32 (default) or int64.
pub(crate) fn multinomial(node: &Node, logits: &Tensor) -> Result<Tensor> {
    let dtype = node.attrs.dtype("dtype")?.unwrap_or(DType::I32);
    if !matches!(dtype, DType::I32 | DType::I64) {
        return unsupported(format!("Multinomial with dtype {dtype} (takes i32 or i64)"));
    }
    let samples = usize::try_from(node.attrs.int_or("sample_size", 1)?)
        .or_else(|_| shape_err("Multinomial sample_size must be non-negative"))?;
    let &[batch, classes] = logits.shape() else {
        return shape_err(format!(
            "Multinomial input must be [batch, classes], found {:?}",
            logits.shape()
        ));
    };
    let v = logits.to_f64_vec();
    let mut rng = Rng::for_node(node)?;
    let mut out = Vec::with_capacity(batch * samples);
    for row in v.chunks(classes.max(1)).take(batch) {
        let top = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cdf: Vec<f64> = row
            .iter()
            .scan(0.0, |acc, &l| {
                *acc += (l - top).exp();
                Some(*acc)
            })
            .collect();
        let total = cdf.last().copied().unwrap_or(0.0);
        for _ in 0..samples {
            let u = rng.uniform() * total;
            let k = cdf
                .iter()
                .position(|&c| u < c)
                .unwrap_or(classes.saturating_sub(1));
            out.push(k as i64);
        }
    }
    let idx = array_from(&[batch, samples], out)?;
    Ok(match dtype {
        DType::I64 => Tensor::I64(idx),
        _ => Tensor::I32(map(&idx, |k| k as i32)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::{Attr, Attrs};
    use ndarray::{ArrayD, IxDyn};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        let mut a = Attrs::default();
        for (k, v) in attrs {
            a.set(k, v.clone());
        }
        Node {
            name: "n".into(),
            op: Op::from_name(op).expect("op exists"),
            attrs: a,
            inputs: vec![],
            outputs: vec![],
        }
    }

    #[test]
    fn seeded_uniform_repeats_and_stays_in_range() {
        let n = node(
            "RandomUniform",
            &[
                ("shape", Attr::Ints(vec![50, 20])),
                ("low", Attr::Float(-2.0)),
                ("high", Attr::Float(3.0)),
                ("seed", Attr::Float(7.0)),
            ],
        );
        let a = uniform(&n, None).unwrap();
        assert_eq!(a, uniform(&n, None).unwrap());
        assert_eq!(a.dtype(), DType::F32);
        let v = a.to_f64_vec();
        assert!(v.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.2, "{mean}");
    }

    #[test]
    fn normal_like_has_right_moments() {
        let like = Tensor::F64(ArrayD::zeros(IxDyn(&[4000])));
        let n = node(
            "RandomNormalLike",
            &[("mean", Attr::Float(1.0)), ("scale", Attr::Float(2.0))],
        );
        let v = normal(&n, Some(&like)).unwrap().to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(
            (mean - 1.0).abs() < 0.15 && (var.sqrt() - 2.0).abs() < 0.15,
            "{mean} {var}"
        );
    }

    #[test]
    fn bernoulli_and_multinomial_respect_certainties() {
        let p = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![0.0, 1.0, 0.0, 1.0]).unwrap());
        let b = bernoulli(
            &node("Bernoulli", &[("dtype", Attr::DType(DType::Bool))]),
            &p,
        )
        .unwrap();
        assert_eq!(b.to_f64_vec(), vec![0.0, 1.0, 0.0, 1.0]);
        let logits = Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![-1e9, 0.0, -1e9, 0.0, -1e9, -1e9]).unwrap(),
        );
        let n = node("Multinomial", &[("sample_size", Attr::Int(5))]);
        let m = multinomial(&n, &logits).unwrap();
        assert_eq!(m.dtype(), DType::I32);
        assert_eq!(m.to_i64_vec(), vec![1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
    }
}
