//! The e-graph analysis: every e-class knows the dtype and shape of its value(s) and,
//! when it is a constant, its value. Types come from the IR's own shape inference (one
//! source of truth for every op), and constants come from the IR's reference
//! interpreter, so constant folding of weight-only sub-graphs (a transposed weight, a
//! weight cast to bf16, folded BatchNorm parameters) is the analysis's `make` plus
//! `modify` adding the folded leaf. The analysis also owns the tables that leaves index:
//! graph input types, constants (small ones interned by content, so equal constants
//! share a class) and attribute sets.

use crate::lang::{Leaf, OpKey, Term};
use egg::{Analysis, DidMerge, EGraph, Id};
use gopt_ir::budget;
use gopt_ir::ops::{EvalCx, InferCx, InferInput};
use gopt_ir::{Attrs, Const, DType, Node, Op, Tensor, TensorType, ValueId};
use std::collections::HashMap;

/// The e-graph type of the optimizer.
pub type Egraph = EGraph<Term, Facts>;

/// Constants up to this many bytes are interned by content (equal ones share a class).
pub const INTERN_MAX_BYTES: usize = 64 * 1024;
/// A node whose inputs are all constant is folded when its result is at most this big
/// or no bigger than its inputs (so folding never materializes a broadcast blow-up).
pub const FOLD_MIN_BYTES: usize = 64 * 1024;

/// What the analysis knows about one e-class.
#[derive(Clone, Debug, Default)]
pub struct Data {
    /// Output types: one for a value, several for a multi-output node, none for an
    /// attribute, integer or absent leaf.
    pub tys: Vec<TensorType>,
    /// The value when it is a compile-time constant (a shared handle: weights are
    /// never copied into the e-graph).
    pub konst: Option<Const>,
    /// Why inference rejected the node that made this class (a rule's candidate that is
    /// not well-typed is never merged into a live class).
    pub error: Option<String>,
}

impl Data {
    /// The single output type.
    pub fn ty(&self) -> Option<&TensorType> {
        match self.tys.as_slice() {
            [t] => Some(t),
            _ => None,
        }
    }

    /// The concrete shape of the single output.
    pub fn shape(&self) -> Option<Vec<usize>> {
        self.ty().and_then(|t| gopt_ir::dim::concrete(&t.shape))
    }

    /// The dtype of the single output.
    pub fn dtype(&self) -> Option<DType> {
        self.ty().map(|t| t.dtype)
    }
}

/// The analysis and the tables its leaves index.
#[derive(Debug, Default)]
pub struct Facts {
    /// Graph input types, by input position.
    pub inputs: Vec<TensorType>,
    /// Constants, by `Leaf::Const` index.
    pub consts: Vec<Const>,
    const_index: HashMap<(DType, Vec<usize>, Vec<u8>), u32>,
    /// Attribute sets, by `Leaf::Attrs` index; 0 is the empty set.
    pub attrs: Vec<Attrs>,
    attrs_index: HashMap<String, u32>,
    /// Matches (rule, class, bound classes) a building rule has already rewritten.
    pub applied: std::collections::HashSet<(egg::Symbol, Id, Vec<Id>)>,
    /// Sibling merges: each member's class and the slice of the merged GEMM that can
    /// replace it (extraction tries switching a whole group at once).
    pub groups: Vec<Vec<(Id, Term)>>,
    /// The classes of the graph's outputs.
    pub roots: Vec<Id>,
}

impl Facts {
    /// Tables for a graph with these input types.
    pub fn new(inputs: Vec<TensorType>) -> Facts {
        let mut f = Facts {
            inputs,
            ..Default::default()
        };
        f.intern_attrs(Attrs::default());
        f
    }

    /// The leaf for an attribute set.
    pub fn intern_attrs(&mut self, a: Attrs) -> Leaf {
        let key = format!("{:?}", a.0);
        if let Some(&i) = self.attrs_index.get(&key) {
            return Leaf::Attrs(i);
        }
        let i = self.attrs.len() as u32;
        self.attrs.push(a);
        self.attrs_index.insert(key, i);
        Leaf::Attrs(i)
    }

    /// The leaf for a constant (small ones shared by content).
    pub fn intern_const(&mut self, t: Const) -> Leaf {
        if t.byte_size() <= INTERN_MAX_BYTES {
            let key = (t.dtype(), t.shape().to_vec(), const_bytes(t.tensor()));
            if let Some(&i) = self.const_index.get(&key) {
                return Leaf::Const(i);
            }
            let i = self.consts.len() as u32;
            self.consts.push(t);
            self.const_index.insert(key, i);
            return Leaf::Const(i);
        }
        let i = self.consts.len() as u32;
        self.consts.push(t);
        Leaf::Const(i)
    }
}

/// A content key for small constants (bit patterns, so -0.0 and NaNs stay distinct).
fn const_bytes(t: &Tensor) -> Vec<u8> {
    match t.dtype() {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => t
            .to_f64_vec()
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect(),
        _ => t
            .to_i64_vec()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

/// The attribute set a class holds, when it is an attribute leaf.
pub fn attrs_of(eg: &Egraph, id: Id) -> Option<&Attrs> {
    eg[id].nodes.iter().find_map(|n| match n {
        Term::Leaf(Leaf::Attrs(i)) => eg.analysis.attrs.get(*i as usize),
        _ => None,
    })
}

/// The integer a class holds, when it is an integer leaf.
pub fn int_of(eg: &Egraph, id: Id) -> Option<i64> {
    eg[id].nodes.iter().find_map(|n| match n {
        Term::Leaf(Leaf::Int(i)) => Some(*i),
        _ => None,
    })
}

/// True when the class is an omitted optional input.
pub fn is_absent(eg: &Egraph, id: Id) -> bool {
    eg[id]
        .nodes
        .iter()
        .any(|n| matches!(n, Term::Leaf(Leaf::Absent)))
}

/// Builds the IR node an op e-node stands for (with placeholder value handles) and the
/// inference view of its inputs, then runs `f` on them.
fn with_node<R>(
    eg: &Egraph,
    op: Op,
    outs: usize,
    children: &[Id],
    f: impl FnOnce(&Node, &[Option<InferInput>]) -> R,
) -> Option<R> {
    let attrs = attrs_of(eg, *children.first()?)?.clone();
    let ins = &children[1..];
    let mut tys: Vec<Option<(TensorType, Option<Const>)>> = Vec::with_capacity(ins.len());
    for &c in ins {
        if is_absent(eg, c) {
            tys.push(None);
        } else {
            let d = &eg[c].data;
            tys.push(Some((d.ty()?.clone(), d.konst.clone())));
        }
    }
    let node = Node {
        name: String::new(),
        op,
        attrs,
        inputs: (0..ins.len())
            .map(|i| Some(ValueId(u32::MAX - 1 - i as u32)))
            .collect(),
        outputs: (0..outs)
            .map(|k| ValueId(u32::MAX - 1000 - k as u32))
            .collect(),
    };
    let views: Vec<Option<InferInput>> = tys
        .iter()
        .map(|t| {
            t.as_ref().map(|(ty, k)| InferInput {
                ty,
                value: k.as_ref().and_then(Const::small),
            })
        })
        .collect();
    Some(f(&node, &views))
}

fn make_op(eg: &Egraph, op: Op, outs: usize, children: &[Id]) -> Data {
    let consts: Vec<Option<Const>> = children
        .iter()
        .skip(1)
        .map(|&c| eg[c].data.konst.clone())
        .collect();
    let r = with_node(eg, op, outs, children, |node, inputs| {
        let mut tys = op.infer(&mut InferCx::default(), node, inputs)?;
        tys.truncate(outs);
        let konst = fold(op, node, inputs, &consts, &tys);
        Ok::<_, gopt_ir::IrError>((tys, konst))
    });
    match r {
        Some(Ok((tys, konst))) => Data {
            tys,
            konst,
            error: None,
        },
        Some(Err(e)) => Data {
            error: Some(format!("{}: {e}", op.name())),
            ..Default::default()
        },
        None => Data {
            error: Some(format!("{}: an input has no single type", op.name())),
            ..Default::default()
        },
    }
}

/// Evaluates a node whose inputs are all constant, within the size policy. A cast or
/// data movement of a large constant (a weight cast to bf16, merged Q/K/V weights) is
/// folded as a lazy view ([`gopt_ir::fold::fold_view`]): nothing is decoded until the
/// plan's weights are written. Other ops decode their inputs into temporaries.
fn fold(
    op: Op,
    node: &Node,
    inputs: &[Option<InferInput>],
    consts: &[Option<Const>],
    tys: &[TensorType],
) -> Option<Const> {
    if tys.len() != 1 || !op.is_deterministic() || inputs.iter().all(Option::is_none) {
        return None;
    }
    // A quantized weight stays integers for its product to read (see
    // `gopt_ir::fold::keeps_quantized`).
    let weight = |i: &Option<InferInput>| i.is_some_and(|i| i.ty.shape.len() >= 2);
    if op == Op::Nn(gopt_ir::ops::NnOp::DequantizeLinear) && inputs.first().is_some_and(weight) {
        return None;
    }
    let mut ks: Vec<Option<&Const>> = Vec::with_capacity(inputs.len());
    let mut in_bytes = 0;
    for (i, k) in inputs.iter().zip(consts) {
        match (i, k) {
            (None, _) => ks.push(None),
            (Some(_), Some(k)) => {
                in_bytes += k.byte_size();
                ks.push(Some(k));
            }
            (Some(_), None) => return None,
        }
    }
    if ks.iter().flatten().any(|k| !k.is_small()) {
        if let Some(k) = gopt_ir::fold::fold_view(node, &ks, &tys[0]) {
            return Some(k);
        }
    }
    let out = gopt_ir::dim::concrete(&tys[0].shape)?;
    let out_bytes = budget::bytes(&out, tys[0].dtype.size())?;
    if out_bytes > FOLD_MIN_BYTES.max(in_bytes) as u64 {
        return None;
    }
    let lookup = |_: &str| None;
    let cx = EvalCx { lookup: &lookup };
    // Large inputs are decoded for this evaluation only (folded BatchNorm parameters
    // of a convolution's weight): the result is kept, the decoded inputs are not.
    let temps: Vec<Option<std::borrow::Cow<'_, Tensor>>> =
        ks.iter().map(|k| k.map(Const::decoded)).collect();
    let vals: Vec<Option<&Tensor>> = temps.iter().map(|t| t.as_deref()).collect();
    // A deterministic budget: what the size policy allows plus a fixed allowance for the
    // work in between (a Loop's iterations), so a constant Loop of 2^62 iterations stays
    // unevaluated instead of hanging the optimizer.
    let fuel = budget::FOLD_FUEL
        .saturating_add(budget::elements(&out)?)
        .saturating_add(vals.iter().flatten().map(|t| t.len() as u64).sum());
    let mut outs = budget::with_fuel(fuel, || op.eval(&cx, node, &vals)).ok()?;
    (!outs.is_empty()).then(|| Const::from(outs.remove(0)))
}

impl Analysis<Term> for Facts {
    type Data = Data;

    fn make(eg: &mut Egraph, enode: &Term) -> Data {
        match enode {
            Term::Leaf(Leaf::Input(i)) => Data {
                tys: eg
                    .analysis
                    .inputs
                    .get(*i as usize)
                    .cloned()
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
            Term::Leaf(Leaf::Const(i)) => {
                let t = eg.analysis.consts.get(*i as usize).cloned();
                Data {
                    tys: t
                        .iter()
                        .map(|t| TensorType::new(t.dtype(), gopt_ir::dim::shape_of(t.shape())))
                        .collect(),
                    konst: t,
                    error: None,
                }
            }
            Term::Leaf(Leaf::Attrs(_) | Leaf::Int(_) | Leaf::Absent) => Data::default(),
            Term::Out([k, n]) => {
                let ty = int_of(eg, *k).and_then(|k| eg[*n].data.tys.get(k as usize).cloned());
                Data {
                    error: ty
                        .is_none()
                        .then(|| "output index out of range".to_string()),
                    tys: ty.into_iter().collect(),
                    konst: None,
                }
            }
            Term::Op(OpKey(op, outs), children) => make_op(eg, *op, *outs as usize, children),
        }
    }

    fn merge(&mut self, to: &mut Data, from: Data) -> DidMerge {
        let mut a = false;
        let mut b = true;
        if to.tys.is_empty() && !from.tys.is_empty() {
            to.tys = from.tys;
            to.error = None;
            a = true;
        }
        match (&to.konst, from.konst) {
            (None, Some(k)) => {
                to.konst = Some(k);
                a = true;
            }
            (Some(_), None) => b = false,
            _ => {}
        }
        DidMerge(a, b)
    }

    fn modify(eg: &mut Egraph, id: Id) {
        let Some(k) = eg[id].data.konst.clone() else {
            return;
        };
        if eg[id]
            .nodes
            .iter()
            .any(|n| matches!(n, Term::Leaf(Leaf::Const(_))))
        {
            return;
        }
        let leaf = eg.analysis.intern_const(k);
        let c = eg.add(Term::Leaf(leaf));
        eg.union(id, c);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    /// A Loop of `trips` iterations over constants whose body doubles a scalar.
    fn loop_egraph(trips: i64) -> crate::convert::Loaded {
        let src = format!(
            r#"graph "g"() -> (%3) {{
  %0 "m": i64[] = const [{trips}]
  %1 "c": bool[] = const [true]
  %2 "v": f32[] = const [1.0]
  %3 "out" = Loop "loop"(%0, %1, %2) {{body=graph "b"(%0 "i": i64[], %1 "cin": bool[], %2 "vin": f32[]) -> (%1, %3) {{
    %3 "v2": f32[] = Add "add"(%2, %2)
  }}}}
}}
"#
        );
        let g = gopt_ir::text::parse(&src).expect("parses");
        let g = gopt_ir::verify(g).expect("verifies");
        crate::convert::to_egraph(&g).expect("loads")
    }

    #[test]
    fn constant_evaluation_has_a_budget() {
        let t = Instant::now();
        let l = loop_egraph(1 << 62);
        let data = &l.egraph[l.roots[0]].data;
        assert!(data.konst.is_none(), "2^62 iterations stay unevaluated");
        assert!(t.elapsed().as_secs() < 20, "took {:?}", t.elapsed());
        let l = loop_egraph(10);
        let k = l.egraph[l.roots[0]]
            .data
            .konst
            .clone()
            .expect("a short loop folds");
        assert_eq!(k.tensor().to_f64_vec(), vec![1024.0]);
    }
}
