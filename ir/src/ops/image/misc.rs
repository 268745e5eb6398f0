//! `TfIdfVectorizer` over integer tokens: counts the n-grams of a pool (with skips
//! between tokens) in each row and weighs the counts by TF, IDF or TF-IDF. Mirrors
//! `op_tfidf_vectorizer.py`: the pool becomes a trie keyed by token, and n-gram ids
//! number every pool entry in order, including sizes outside `[min, max]` gram length.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{unsupported, IrError, Result};
use crate::graph::{Node, TensorType};
use crate::ops::util::{in_ty, input};
use crate::ops::InferInput;
use crate::tensor::Tensor;
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

/// One trie node: the n-gram id ending here (0: none) and the continuations.
#[derive(Default)]
struct Trie {
    id: usize,
    next: HashMap<i64, usize>,
}

/// The parsed attributes.
struct Vectorizer {
    nodes: Vec<Trie>,
    min_gram: usize,
    max_gram: usize,
    max_skip: usize,
    mode: Weighting,
    indexes: Vec<usize>,
    out_size: usize,
    weights: Vec<f32>,
}

#[derive(Clone, Copy, PartialEq)]
enum Weighting {
    Tf,
    Idf,
    TfIdf,
}

fn attr_usize(node: &Node, name: &str) -> Result<usize> {
    let v = node.attrs.req_int(name)?;
    usize::try_from(v).map_err(|_| IrError::Attr {
        name: name.into(),
        msg: format!("must not be negative, found {v}"),
    })
}

fn output_size(node: &Node) -> Result<usize> {
    let idx = node.attrs.ints("ngram_indexes")?.unwrap_or(&[]);
    if idx.iter().any(|&i| i < 0) {
        return Err(IrError::Attr {
            name: "ngram_indexes".into(),
            msg: "must not be negative".into(),
        });
    }
    Ok(idx.iter().max().map_or(0, |&m| m as usize + 1))
}

impl Vectorizer {
    fn new(node: &Node) -> Result<Vectorizer> {
        let a = &node.attrs;
        if a.has("pool_strings") {
            return unsupported("TfIdfVectorizer over strings");
        }
        let mode = match a.str("mode")?.unwrap_or("TF") {
            "TF" => Weighting::Tf,
            "IDF" => Weighting::Idf,
            "TFIDF" => Weighting::TfIdf,
            m => return unsupported(format!("TfIdfVectorizer mode `{m}`")),
        };
        let pool = a.ints("pool_int64s")?.unwrap_or(&[]);
        let counts = a.ints("ngram_counts")?.unwrap_or(&[]);
        let mut v = Vectorizer {
            nodes: vec![Trie::default()],
            min_gram: attr_usize(node, "min_gram_length")?,
            max_gram: attr_usize(node, "max_gram_length")?,
            max_skip: attr_usize(node, "max_skip_count")?,
            mode,
            indexes: a
                .ints("ngram_indexes")?
                .unwrap_or(&[])
                .iter()
                .map(|&i| i.max(0) as usize)
                .collect(),
            out_size: output_size(node)?,
            weights: a.floats("weights")?.unwrap_or(&[]).to_vec(),
        };
        let mut id = 1;
        for (i, &start) in counts.iter().enumerate() {
            let size = i + 1;
            let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
            let (start, end) = (start.max(0) as usize, (end.max(0) as usize).min(pool.len()));
            if end <= start {
                continue;
            }
            let ngrams = (end - start) / size;
            if size >= v.min_gram && size <= v.max_gram {
                for g in 0..ngrams {
                    let gram = &pool[start + g * size..start + (g + 1) * size];
                    v.insert(gram, id);
                    id += 1;
                }
            } else {
                id += ngrams;
            }
        }
        Ok(v)
    }

    fn insert(&mut self, gram: &[i64], id: usize) {
        let mut at = 0;
        for &tok in gram {
            at = match self.nodes[at].next.get(&tok) {
                Some(&n) => n,
                None => {
                    self.nodes.push(Trie::default());
                    let n = self.nodes.len() - 1;
                    self.nodes[at].next.insert(tok, n);
                    n
                }
            };
        }
        self.nodes[at].id = id;
    }

    /// Adds the n-gram counts of one row to `freq`.
    fn count_row(&self, row: &[i64], freq: &mut [u64]) -> Result<()> {
        let mut start_size = self.min_gram;
        for skip in 1..=self.max_skip + 1 {
            for begin in 0..row.len() {
                if begin + skip * start_size.saturating_sub(1) >= row.len() {
                    break;
                }
                let (mut at, mut size, mut item) = (0, 1, begin);
                while !self.nodes[at].next.is_empty() && size <= self.max_gram && item < row.len() {
                    let Some(&n) = self.nodes[at].next.get(&row[item]) else {
                        break;
                    };
                    let id = self.nodes[n].id;
                    if size >= start_size && id != 0 {
                        let slot =
                            self.indexes
                                .get(id - 1)
                                .copied()
                                .ok_or_else(|| IrError::Attr {
                                    name: "ngram_indexes".into(),
                                    msg: format!("has no entry for n-gram {id}"),
                                })?;
                        freq[slot] += 1;
                    }
                    at = n;
                    size += 1;
                    item += skip;
                }
            }
            if start_size == 1 {
                start_size += 1;
                if start_size > self.max_gram {
                    break;
                }
            }
        }
        Ok(())
    }

    fn weigh(&self, freq: &[u64]) -> Vec<f32> {
        let w = |i: usize| self.weights.get(i % self.out_size.max(1)).copied();
        freq.iter()
            .enumerate()
            .map(|(i, &f)| match self.mode {
                Weighting::Tf => f as f32,
                Weighting::Idf if !self.weights.is_empty() => {
                    if f > 0 {
                        w(i).unwrap_or(0.0)
                    } else {
                        0.0
                    }
                }
                Weighting::Idf => (f > 0) as u8 as f32,
                Weighting::TfIdf if !self.weights.is_empty() => w(i).unwrap_or(0.0) * f as f32,
                Weighting::TfIdf => f as f32,
            })
            .collect()
    }
}

/// Runs TfIdfVectorizer.
pub(super) fn tfidf(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let x = input(inputs, 0)?;
    if !matches!(x.dtype(), DType::I32 | DType::I64) {
        return Err(IrError::DType {
            context: "TfIdfVectorizer input".into(),
            expected: "i32 or i64".into(),
            found: x.dtype(),
        });
    }
    let v = Vectorizer::new(node)?;
    let tokens = x.to_i64_vec();
    let (rows, cols, out_shape) = match x.shape() {
        [] => (1, 1, vec![v.out_size]),
        [c] => (1, *c, vec![v.out_size]),
        [b, c] if *b > 0 => (*b, *c, vec![*b, v.out_size]),
        s => {
            return Err(IrError::Shape(format!(
                "TfIdfVectorizer input {s:?} must be [C] or [B, C] with B > 0"
            )))
        }
    };
    let mut freq = vec![0u64; rows * v.out_size];
    if cols > 0 && !v.nodes[0].next.is_empty() {
        for r in 0..rows {
            v.count_row(
                &tokens[r * cols..(r + 1) * cols],
                &mut freq[r * v.out_size..(r + 1) * v.out_size],
            )?;
        }
    }
    let out = ArrayD::from_shape_vec(IxDyn(&out_shape), v.weigh(&freq)).expect("output size");
    Ok(vec![Tensor::F32(out)])
}

/// TfIdfVectorizer's output type: f32 `[out]` or `[B, out]`.
pub(super) fn infer_tfidf(node: &Node, inputs: &[Option<InferInput>]) -> Result<Vec<TensorType>> {
    let x = in_ty(inputs, 0)?.ty;
    let out = Dim::from(output_size(node)?);
    let shape = match x.shape.len() {
        0 | 1 => vec![out],
        2 => vec![x.shape[0].clone(), out],
        r => {
            return Err(IrError::Shape(format!(
                "TfIdfVectorizer input {x} must be rank 1 or 2, found rank {r}"
            )))
        }
    };
    Ok(vec![TensorType::new(DType::F32, shape)])
}
