//! LinearAttention (opset 26/27), read once for every backend: the update rule (`linear`,
//! `gated`, `delta`, `gated_delta`), the head counts (grouped-query heads share a
//! key/value head), the sizes (batch, time steps, key width `dk`, value width `dv`), the
//! forms of `decay` (one gate per head, or one per key row) and `beta` (one per head, or
//! one shared), the scale, and each operand's dtype.
//!
//! The recurrence, as the interpreter runs it (`ir/src/ops/attention/linear.rs`), per
//! (batch, kv head) over the time steps, on a `dk x dv` state `S`:
//! `S *= exp(decay)` row-wise (gated rules); `u = v`, or `u = beta * (v - Sᵀk)` (delta
//! rules); `S += k uᵀ`; then each query head of the group outputs `scale * qᵀS`. Every
//! column of `S` evolves on its own (the decay scales rows, the rest is per column), so
//! the writers run one invocation per (batch, kv head, value column) over the whole
//! sequence, its column of `S` in a private array of `dk` floats: `dk` is bounded
//! ([`MAX_DK`]). Everything is computed in f32 and rounded to the outputs' dtypes only
//! when stored, as the interpreter does.

use super::support::{check_float, input, opt_input, output, plan, typed, unsupported, Site};
use crate::Result;
use gopt_ir::{DType, Graph, Node, ValueId};

/// The largest key width the kernels take: each invocation keeps a column of the state,
/// `dk` f32, in a private array (1 KiB at 256, within WGSL's 8 KiB of function memory;
/// registers, or local memory past them, on CUDA).
pub const MAX_DK: usize = 256;

/// An operand: its value and the dtype it is stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The graph value.
    pub v: ValueId,
    /// Its dtype (f32, f16 or bf16).
    pub dtype: DType,
}

/// The gate `decay` (its exponential scales the state's rows each step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decay {
    /// The input `[batch, steps, width]`.
    pub x: Operand,
    /// One gate per key row (`width = kv_heads * dk`), else one per head
    /// (`width = kv_heads`).
    pub per_key: bool,
}

/// The delta rule's step size `beta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beta {
    /// The input `[batch, steps, width]`.
    pub x: Operand,
    /// One for every head (`width = 1`), else one per head (`width = kv_heads`).
    pub shared: bool,
}

/// The attributes of a LinearAttention node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// The state decays by `exp(decay)` each step (`gated`, `gated_delta`).
    pub gating: bool,
    /// The delta rule: the state is corrected towards `v` by `beta` (`delta`,
    /// `gated_delta`).
    pub delta: bool,
    /// Query heads.
    pub q_heads: usize,
    /// Key/value heads (a divisor of `q_heads`).
    pub kv_heads: usize,
    /// The `scale` attribute (0: `1 / sqrt(dk)`).
    pub scale: f32,
}

/// A LinearAttention node, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearAttentionSpec {
    /// The node.
    pub site: Site,
    /// `query` `[batch, steps, q_heads * dk]`.
    pub q: Operand,
    /// `key` `[batch, steps, kv_heads * dk]`.
    pub k: Operand,
    /// `value` `[batch, steps, kv_heads * dv]`.
    pub v: Operand,
    /// `past_state` `[batch, kv_heads, dk, dv]`, when given (else the state starts at 0).
    pub past: Option<Operand>,
    /// `decay`, with the gated rules.
    pub decay: Option<Decay>,
    /// `beta`, with the delta rules.
    pub beta: Option<Beta>,
    /// `output` `[batch, steps, q_heads * dv]` (the query's dtype).
    pub out: Operand,
    /// `present_state` `[batch, kv_heads, dk, dv]`, when asked for.
    pub state: Option<Operand>,
    /// Batch.
    pub batch: usize,
    /// Time steps.
    pub steps: usize,
    /// Query heads.
    pub q_heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Key (and query) width of a head.
    pub dk: usize,
    /// Value width of a head.
    pub dv: usize,
    /// The factor of every output (`1 / sqrt(dk)` unless the attribute gives one),
    /// rounded once from f64 to f32.
    pub scale: f32,
}

impl LinearAttentionSpec {
    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.q_heads / self.kv_heads
    }

    /// Invocations: one per (batch, kv head, value column).
    pub fn columns(&self) -> usize {
        self.batch * self.kv_heads * self.dv
    }

    /// The update rule's ONNX name.
    pub fn rule_name(&self) -> &'static str {
        match (self.decay.is_some(), self.beta.is_some()) {
            (false, false) => "linear",
            (true, false) => "gated",
            (false, true) => "delta",
            (true, true) => "gated_delta",
        }
    }

    /// Elements of `output`.
    pub fn out_elems(&self) -> usize {
        self.batch * self.steps * self.q_heads * self.dv
    }

    /// Elements of the state.
    pub fn state_elems(&self) -> usize {
        self.batch * self.kv_heads * self.dk * self.dv
    }
}

/// Reads the attributes of LinearAttention node `node`.
pub fn rule(node: &Node) -> Result<Rule> {
    let a = &node.attrs;
    let (gating, delta) = match a.str_or("update_rule", "gated_delta").map_err(plan)? {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(unsupported(node, &format!("update_rule {r:?}"))),
    };
    let q = a.req_int("q_num_heads").map_err(plan)?;
    let kv = a.req_int("kv_num_heads").map_err(plan)?;
    if q <= 0 || kv <= 0 || q % kv != 0 {
        return Err(unsupported(
            node,
            &format!("q_num_heads {q} that is not a positive multiple of kv_num_heads {kv}"),
        ));
    }
    Ok(Rule {
        gating,
        delta,
        q_heads: usize::try_from(q).map_err(plan)?,
        kv_heads: usize::try_from(kv).map_err(plan)?,
        scale: a.float_or("scale", 0.0).map_err(plan)?,
    })
}

/// The factor of the outputs: the attribute, or `1 / sqrt(dk)` when it is 0 (computed
/// in f64, as the interpreter does, and rounded once).
pub fn scale(attr: f32, dk: usize) -> f32 {
    if attr == 0.0 {
        (1.0 / (dk as f64).sqrt()) as f32
    } else {
        attr
    }
}

/// Input `k` of `node` (when present) as a float operand of rank 3, and its shape.
fn operand3(g: &Graph, node: &Node, v: ValueId, what: &str) -> Result<(Operand, [usize; 3])> {
    let (dtype, s) = typed(g, node, v)?;
    check_float(node, dtype, what)?;
    let [a, b, c] = s[..] else {
        return Err(unsupported(
            node,
            &format!("a {what} of shape {s:?} (not 3-D)"),
        ));
    };
    Ok((Operand { v, dtype }, [a, b, c]))
}

/// Reads LinearAttention node `node` of `g`.
pub fn spec(g: &Graph, node: &Node) -> Result<LinearAttentionSpec> {
    let r = rule(node)?;
    let (q, [batch, steps, qw]) = operand3(g, node, input(node, 0)?, "query")?;
    let (k, ks) = operand3(g, node, input(node, 1)?, "key")?;
    let (v, vs) = operand3(g, node, input(node, 2)?, "value")?;
    let (hq, hk) = (r.q_heads, r.kv_heads);
    let (dk, dv) = (qw / hq, vs[2] / hk);
    if qw % hq != 0 || vs[2] % hk != 0 || ks != [batch, steps, hk * dk] || vs[..2] != [batch, steps]
    {
        return Err(unsupported(
            node,
            &format!(
                "query {:?}, key {ks:?}, value {vs:?} that do not fit {hq} query and {hk} kv heads",
                [batch, steps, qw]
            ),
        ));
    }
    if dk == 0 || dk > MAX_DK {
        return Err(unsupported(
            node,
            &format!("a key width of {dk} per head (the kernels take 1 to {MAX_DK})"),
        ));
    }
    let past = match opt_input(node, 3) {
        None => None,
        Some(p) => {
            let (dtype, s) = typed(g, node, p)?;
            check_float(node, dtype, "past_state")?;
            if s != [batch, hk, dk, dv] {
                return Err(unsupported(
                    node,
                    &format!("a past_state {s:?}, not {:?}", [batch, hk, dk, dv]),
                ));
            }
            Some(Operand { v: p, dtype })
        }
    };
    let decay = opt_input(node, 4)
        .map(|d| -> Result<Decay> {
            let (x, s) = operand3(g, node, d, "decay")?;
            match s {
                [b, t, w] if [b, t] == [batch, steps] && w == hk => Ok(Decay { x, per_key: false }),
                [b, t, w] if [b, t] == [batch, steps] && w == hk * dk => {
                    Ok(Decay { x, per_key: true })
                }
                other => Err(unsupported(node, &format!("a decay {other:?}"))),
            }
        })
        .transpose()?;
    let beta = opt_input(node, 5)
        .map(|be| -> Result<Beta> {
            let (x, s) = operand3(g, node, be, "beta")?;
            match s {
                [b, t, w] if [b, t] == [batch, steps] && w == hk => Ok(Beta { x, shared: false }),
                [b, t, 1] if [b, t] == [batch, steps] => Ok(Beta { x, shared: true }),
                other => Err(unsupported(node, &format!("a beta {other:?}"))),
            }
        })
        .transpose()?;
    if r.gating != decay.is_some() || r.delta != beta.is_some() {
        return Err(unsupported(
            node,
            &format!(
                "an update rule that needs decay: {}, beta: {}, given decay: {}, beta: {}",
                r.gating,
                r.delta,
                decay.is_some(),
                beta.is_some()
            ),
        ));
    }
    let out_operand = |k: usize| -> Result<Operand> {
        let o = output(node, k)?;
        let (dtype, _) = typed(g, node, o)?;
        check_float(node, dtype, "output")?;
        Ok(Operand { v: o, dtype })
    };
    let out = out_operand(0)?;
    let state = match node.outputs.get(1) {
        Some(_) => Some(out_operand(1)?),
        None => None,
    };
    Ok(LinearAttentionSpec {
        site: Site::of(node),
        q,
        k,
        v,
        past,
        decay,
        beta,
        out,
        state,
        batch,
        steps,
        q_heads: hq,
        kv_heads: hk,
        dk,
        dv,
        scale: scale(r.scale, dk),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::support::test_graph as graph;
    use gopt_ir::attr::{Attr, Attrs};
    use gopt_ir::ops::AttentionOp;
    use gopt_ir::Op;

    fn node(attrs: &[(&str, Attr)]) -> Node {
        let mut a = Attrs::default();
        for (k, v) in attrs {
            a.set(k, v.clone());
        }
        Node {
            name: "n".into(),
            op: Op::Attention(AttentionOp::LinearAttention),
            attrs: a,
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    #[test]
    fn rules_heads_and_scale() {
        let heads = [
            ("q_num_heads", Attr::Int(8)),
            ("kv_num_heads", Attr::Int(2)),
        ];
        let r = rule(&node(&heads)).unwrap();
        // The default rule is gated_delta.
        assert!(r.gating && r.delta);
        assert_eq!((r.q_heads, r.kv_heads), (8, 2));
        assert_eq!(scale(r.scale, 16), 0.25);

        let mut a = heads.to_vec();
        a.push(("update_rule", Attr::Str("gated".into())));
        a.push(("scale", Attr::Float(0.5)));
        let r = rule(&node(&a)).unwrap();
        assert!(r.gating && !r.delta);
        assert_eq!(scale(r.scale, 16), 0.5);

        let mut a = heads.to_vec();
        a.push(("update_rule", Attr::Str("softmax".into())));
        assert!(rule(&node(&a)).is_err());
        let bad = [
            ("q_num_heads", Attr::Int(3)),
            ("kv_num_heads", Attr::Int(2)),
        ];
        assert!(rule(&node(&bad)).is_err());
        assert!(rule(&node(&heads[..1])).is_err());
    }

    #[test]
    fn reads_heads_gates_and_optional_operands() {
        // GQA (8 query heads over 2 kv heads), a per-key decay, a shared beta, a past.
        let g = graph(
            r#"graph "g"(%0 "q": f16[2,5,32], %1 "k": f16[2,5,8], %2 "v": f16[2,5,12], %3 "p": f32[2,2,4,6], %4 "d": f16[2,5,8], %5 "b": f16[2,5,1]) -> (%6, %7) {
  %6 "y": f16[2,5,48], %7 "s": f32[2,2,4,6] = LinearAttention "la"(%0, %1, %2, %3, %4, %5) {q_num_heads = 8, kv_num_heads = 2}
}"#,
        );
        let s = spec(&g, &g.nodes[0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.batch, s.steps, s.dk, s.dv, s.group()), (2, 5, 4, 6, 4));
        assert_eq!(s.rule_name(), "gated_delta");
        assert!(s.decay.is_some_and(|d| d.per_key));
        assert!(s.beta.is_some_and(|b| b.shared));
        assert_eq!(s.past.map(|p| p.dtype), Some(DType::F32));
        assert_eq!(
            (s.out.dtype, s.state.map(|x| x.dtype)),
            (DType::F16, Some(DType::F32))
        );
        assert_eq!((s.scale, s.columns()), (0.5, 24));

        // The linear rule, a per-head decay refused without the gate, no state output.
        let g = graph(
            r#"graph "g"(%0 "q": f32[1,3,16], %1 "k": f32[1,3,16], %2 "v": f32[1,3,8]) -> (%3) {
  %3 "y": f32[1,3,8] = LinearAttention "la"(%0, %1, %2) {q_num_heads = 2, kv_num_heads = 2, update_rule = "linear", scale = 0.25}
}"#,
        );
        let s = spec(&g, &g.nodes[0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.rule_name(), s.scale, s.dk, s.dv), ("linear", 0.25, 8, 4));
        assert!(s.state.is_none() && s.past.is_none());
    }
}
