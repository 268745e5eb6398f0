//! What generation feeds each step: the prompt padded into the prefill bucket (rows on
//! the right with token 0 and a mask of 0; missing batch rows repeat the first prompt),
//! and per decode step the last token, its position, the slot its key goes to and the
//! mask of the slots written so far, in the dtypes the model declares. Inputs are found
//! by name in each step's graph (the caches by their past inputs' names), so a step's
//! input order is never assumed.

use super::steps::CompiledStep;
use crate::{GoptError, Result};
use gopt_ir::{DType, Graph, Tensor};
use gopt_passes::decoder::{Decoder, CACHE_POSITION};

/// Refuses an empty batch, an empty prompt, or a token outside `0..vocab`.
pub(super) fn check_prompts(prompts: &[Vec<i64>], vocab: u64) -> Result<()> {
    if prompts.is_empty() {
        return Err(GoptError::Inputs("no prompt given".into()));
    }
    for (r, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return Err(GoptError::Inputs(format!("prompt {r} has no tokens")));
        }
        if let Some((i, &t)) = p
            .iter()
            .enumerate()
            .find(|(_, &t)| t < 0 || t as u64 >= vocab)
        {
            return Err(GoptError::Inputs(format!(
                "prompt {r}, token {i}: id {t} is outside the vocabulary (0..{vocab}, the logits' size)"
            )));
        }
    }
    Ok(())
}

/// Input indices of one step's graph, by role.
#[derive(Clone, Debug, Default)]
struct Roles {
    ids: Option<(usize, DType)>,
    mask: Option<(usize, DType)>,
    positions: Option<(usize, DType)>,
    write: Option<(usize, DType)>,
    nonpad: Option<(usize, DType)>,
}

impl Roles {
    fn of(g: &Graph, d: &Decoder) -> Result<Roles> {
        let find = |name: Option<&String>| -> Result<Option<(usize, DType)>> {
            let Some(name) = name else { return Ok(None) };
            match g.inputs.iter().position(|&v| g.value(v).name == *name) {
                Some(i) => Ok(Some((i, g.ty(g.inputs[i])?.dtype))),
                None => Ok(None),
            }
        };
        let position = CACHE_POSITION.to_string();
        Ok(Roles {
            ids: find(Some(&d.input_ids))?,
            mask: find(d.attention_mask.as_ref())?,
            positions: find(d.position_ids.as_ref())?,
            write: find(d.write_indices.as_ref())?.or(find(Some(&position))?),
            nonpad: find(d.nonpad.as_ref())?,
        })
    }
}

/// How to build the prefill and decode steps' inputs.
pub(super) struct Feed {
    prefill: Roles,
    decode: Roles,
    /// The decode step's input index of each cache (decoder order).
    pub cache_inputs: Vec<usize>,
    /// The prefill step's inputs that are caches (the scatter form's), zeros.
    prefill_caches: Vec<(usize, DType, Vec<usize>)>,
}

fn ints(dtype: DType, shape: &[usize], values: &[i64]) -> Result<Tensor> {
    let f: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    Ok(Tensor::from_f64s(dtype, shape, &f)?)
}

impl Feed {
    pub fn new(d: &Decoder, prefill: &CompiledStep, decode: &CompiledStep) -> Result<Feed> {
        let mut f = Feed::for_decode(d, decode)?;
        let pg = &prefill.variant.graph;
        f.prefill = Roles::of(pg, d)?;
        for c in &d.caches {
            if let Some(i) = pg.inputs.iter().position(|&v| pg.value(v).name == c.past) {
                let ty = pg.ty(pg.inputs[i])?;
                let shape = gopt_ir::dim::concrete(&ty.shape).ok_or_else(|| {
                    GoptError::Usage(format!("cache `{}` has no fixed shape", c.past))
                })?;
                f.prefill_caches.push((i, ty.dtype, shape));
            }
        }
        Ok(f)
    }

    pub fn for_decode(d: &Decoder, decode: &CompiledStep) -> Result<Feed> {
        let g = &decode.variant.graph;
        let cache_inputs = d
            .caches
            .iter()
            .map(|c| {
                g.inputs
                    .iter()
                    .position(|&v| g.value(v).name == c.past)
                    .ok_or_else(|| {
                        GoptError::Usage(format!("the decode step has no cache `{}`", c.past))
                    })
            })
            .collect::<Result<Vec<usize>>>()?;
        Ok(Feed {
            prefill: Roles::default(),
            decode: Roles::of(g, d)?,
            cache_inputs,
            prefill_caches: Vec::new(),
        })
    }

    /// The prefill step's inputs, in its graph's order: `prompts` padded to `seq`
    /// tokens and `batch` rows.
    pub fn prefill(&self, prompts: &[Vec<i64>], batch: usize, seq: usize) -> Result<Vec<Tensor>> {
        let mut ids = vec![0i64; batch * seq];
        let mut mask = vec![0i64; batch * seq];
        for r in 0..batch {
            let p = prompts.get(r).unwrap_or(&prompts[0]);
            ids[r * seq..r * seq + p.len()].copy_from_slice(p);
            mask[r * seq..r * seq + p.len()]
                .iter_mut()
                .for_each(|m| *m = 1);
        }
        let positions: Vec<i64> = (0..batch).flat_map(|_| 0..seq as i64).collect();
        let n = self.prefill_caches.len()
            + [
                self.prefill.ids,
                self.prefill.mask,
                self.prefill.positions,
                self.prefill.write,
                self.prefill.nonpad,
            ]
            .iter()
            .flatten()
            .count();
        let mut out: Vec<Option<Tensor>> = vec![None; n];
        let mut put = |role: Option<(usize, DType)>, shape: &[usize], v: &[i64]| -> Result<()> {
            if let Some((i, dt)) = role {
                *out.get_mut(i)
                    .ok_or_else(|| GoptError::Usage("prefill input out of order".into()))? =
                    Some(ints(dt, shape, v)?);
            }
            Ok(())
        };
        put(self.prefill.ids, &[batch, seq], &ids)?;
        put(self.prefill.mask, &[batch, seq], &mask)?;
        put(self.prefill.positions, &[batch, seq], &positions)?;
        put(self.prefill.write, &[batch], &vec![0; batch])?;
        // Every slot of the padded prompt is written: causality keeps a row's real
        // queries off its padding, and decode masks the padding until it is written over.
        put(self.prefill.nonpad, &[batch], &vec![seq as i64; batch])?;
        for (i, dt, shape) in &self.prefill_caches {
            if let Some(slot) = out.get_mut(*i) {
                *slot = Some(Tensor::zeros(*dt, shape));
            }
        }
        out.into_iter()
            .map(|t| {
                t.ok_or_else(|| {
                    GoptError::Usage("the prefill step has an input gopt cannot feed".into())
                })
            })
            .collect()
    }

    /// One decode step's inputs (index, tensor), caches left out: row `r`'s token
    /// `next[r]` at position `pos[r]`, written to slot `pos[r]`, the mask 1 on slots
    /// `0..=pos[r]`. Rows past `next.len()` repeat row 0.
    pub fn decode(
        &self,
        next: &[i64],
        pos: &[u64],
        batch: usize,
        context: usize,
    ) -> Result<Vec<(usize, Tensor)>> {
        let row = |r: usize| if r < next.len() { r } else { 0 };
        let ids: Vec<i64> = (0..batch).map(|r| next[row(r)]).collect();
        let at: Vec<i64> = (0..batch).map(|r| pos[row(r)] as i64).collect();
        let mut mask = vec![0i64; batch * context];
        for r in 0..batch {
            let upto = (at[r] as usize + 1).min(context);
            mask[r * context..r * context + upto]
                .iter_mut()
                .for_each(|m| *m = 1);
        }
        let nonpad: Vec<i64> = at.iter().map(|p| p + 1).collect();
        let mut out = Vec::new();
        let r = &self.decode;
        for (role, shape, v) in [
            (r.ids, vec![batch, 1], &ids),
            (r.positions, vec![batch, 1], &at),
            (r.mask, vec![batch, context], &mask),
            (r.write, vec![batch], &at),
            (r.nonpad, vec![batch], &nonpad),
        ] {
            if let Some((i, dt)) = role {
                out.push((i, ints(dt, &shape, v)?));
            }
        }
        Ok(out)
    }
}
