//! IR ↔ e-graph. `to_egraph` adds every node of a verified graph (constants and inputs
//! become leaves, attributes interned, several outputs projected with `out`), keeping
//! which class each IR value landed in so names survive the round trip. `to_graph`
//! rebuilds an IR graph from one chosen e-node per class, reachable from the outputs,
//! in a stable depth-first order; graph inputs keep their order, names and types, and
//! outputs keep their names.

use crate::analysis::{attrs_of, int_of, Egraph, Facts};
use crate::lang::{Leaf, OpKey, Term};
use crate::{PassError, Result};
use egg::Id;
use gopt_ir::{Graph, TensorType, ValueId, Verified};
use std::collections::HashMap;

/// A graph in an e-graph: the classes of its outputs and the names of its values.
#[derive(Debug)]
pub struct Loaded {
    /// The e-graph.
    pub egraph: Egraph,
    /// One class per graph output.
    pub roots: Vec<Id>,
    /// Source value names, by the class they landed in (first name wins).
    pub names: HashMap<Id, String>,
    /// Per IR node (by index): its class and its e-node.
    pub node_terms: Vec<(Id, Term)>,
    /// Values that sub-graphs (If/Loop/Scan bodies) read by name: their classes and
    /// names. They are extracted like outputs and keep their names, since the bodies'
    /// captures resolve by name.
    pub pinned: Vec<(Id, String)>,
}

/// Adds a verified graph to a fresh e-graph (its constants shared, not copied).
pub fn to_egraph(g: &Verified) -> Result<Loaded> {
    to_egraph_parts(g, g.constants.clone())
}

/// [`to_egraph`] with the constants handed over instead of copied.
pub fn to_egraph_parts(
    g: &Graph,
    consts: std::collections::BTreeMap<ValueId, gopt_ir::Const>,
) -> Result<Loaded> {
    let inputs: Vec<TensorType> = g
        .inputs
        .iter()
        .map(|&v| g.ty(v).cloned())
        .collect::<std::result::Result<_, _>>()?;
    let mut eg = Egraph::new(Facts::new(inputs));
    let (roots, names, node_terms, pinned) = add_parts(&mut eg, g, consts)?;
    eg.analysis.roots = roots.clone();
    eg.rebuild();
    Ok(Loaded {
        egraph: eg,
        roots,
        names,
        node_terms,
        pinned,
    })
}

/// What [`add_graph`] returns: output classes, value names by class, per-node terms,
/// and the values sub-graphs capture by name (see [`Loaded::pinned`]).
pub type Added = (
    Vec<Id>,
    HashMap<Id, String>,
    Vec<(Id, Term)>,
    Vec<(Id, String)>,
);

/// Adds a verified graph to an existing e-graph whose inputs have the same types (its
/// inputs become the same leaves, so two graphs over the same inputs can be compared
/// class by class — how rule tests check that a rewrite reached its goal).
pub fn add_graph(eg: &mut Egraph, g: &Verified) -> Result<Added> {
    add_parts(eg, g, g.constants.clone())
}

/// [`add_graph`] with the constants handed over (moved into the e-graph, not copied:
/// a model's weights are most of its memory).
pub fn add_parts(
    eg: &mut Egraph,
    g: &Graph,
    consts: std::collections::BTreeMap<ValueId, gopt_ir::Const>,
) -> Result<Added> {
    let mut class: HashMap<ValueId, Id> = HashMap::new();
    for (i, &v) in g.inputs.iter().enumerate() {
        class.insert(v, eg.add(Term::Leaf(Leaf::Input(i as u32))));
    }
    for (v, t) in consts {
        let leaf = eg.analysis.intern_const(t);
        class.insert(v, eg.add(Term::Leaf(leaf)));
    }
    let absent = eg.add(Term::Leaf(Leaf::Absent));
    let mut node_terms = Vec::with_capacity(g.nodes.len());
    for node in &g.nodes {
        let a = eg.analysis.intern_attrs(node.attrs.clone());
        let mut ch = vec![eg.add(Term::Leaf(a))];
        for i in &node.inputs {
            ch.push(match i {
                None => absent,
                Some(v) => *class.get(v).ok_or_else(|| {
                    PassError::Internal(format!("node `{}` reads an undefined value", node.name))
                })?,
            });
        }
        for _ in ch.len() - 1..padded_arity(node.op) {
            ch.push(absent);
        }
        let term = Term::Op(OpKey(node.op, node.outputs.len() as u32), ch);
        let id = eg.add(term.clone());
        node_terms.push((id, term));
        if let Some(e) = &eg[id].data.error {
            return Err(PassError::Internal(format!("node `{}`: {e}", node.name)));
        }
        if node.outputs.len() == 1 {
            class.insert(node.outputs[0], id);
        } else {
            for (k, &o) in node.outputs.iter().enumerate() {
                let kk = eg.add(Term::Leaf(Leaf::Int(k as i64)));
                class.insert(o, eg.add(Term::Out([kk, id])));
            }
        }
    }
    let roots = g
        .outputs
        .iter()
        .map(|v| class.get(v).copied())
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| PassError::Internal("a graph output is undefined".into()))?;
    let mut names = HashMap::new();
    for (i, val) in g.values.iter().enumerate() {
        if let Some(id) = class.get(&ValueId(i as u32)) {
            names.entry(*id).or_insert_with(|| val.name.clone());
        }
    }
    let mut pinned: Vec<(Id, String)> = Vec::new();
    for uses in g.capture_uses() {
        for v in uses {
            let name = g.value(v).name.clone();
            if let (false, Some(c)) = (pinned.iter().any(|(_, n)| *n == name), class.get(&v)) {
                pinned.push((*c, name));
            }
        }
    }
    Ok((roots, names, node_terms, pinned))
}

/// Ops whose trailing optional inputs the rules match on get them as explicit absent
/// leaves, so one pattern covers both forms (`Conv(x, w)` is `(Conv a x w none)`).
fn padded_arity(op: gopt_ir::Op) -> usize {
    use gopt_ir::ops::{AttentionOp, ElementwiseOp, FusedOp, NnOp, ShapeOp};
    use gopt_ir::Op;
    match op {
        Op::Nn(NnOp::Conv | NnOp::Gemm) => 3,
        Op::Elementwise(ElementwiseOp::Clip) => 3,
        Op::Shape(ShapeOp::Squeeze) => 2,
        Op::Fused(FusedOp::FusedMatMul | FusedOp::FusedConv) => 4,
        Op::Attention(AttentionOp::Attention) => 4,
        _ => 0,
    }
}

/// Rebuilds an IR graph from the chosen node of each class (`choice[class]`), keeping
/// the source graph's name, inputs and output names.
pub fn to_graph(
    eg: &Egraph,
    choice: &HashMap<Id, Term>,
    roots: &[Id],
    names: &HashMap<Id, String>,
    pinned: &[(Id, String)],
    source: &Graph,
) -> Result<Rebuilt> {
    let mut out = Graph::new(&source.name);
    let mut b = Builder {
        eg,
        choice,
        names: canonical_names(eg, names),
        made: HashMap::new(),
        g: &mut out,
        count: 0,
        consts: Vec::new(),
        node_classes: Vec::new(),
    };
    for &v in &source.inputs {
        let ty = source.ty(v)?.clone();
        b.g.add_input(&source.value(v).name, ty);
    }
    for (c, name) in pinned {
        let v = b.value(*c)?;
        if b.g.value(v).name != *name {
            b.g.add_node(
                &format!("{name}/pinned"),
                gopt_ir::Op::Shape(gopt_ir::ops::ShapeOp::Identity),
                Default::default(),
                vec![Some(v)],
                &[name],
            );
        }
    }
    let mut outs = Vec::new();
    for (k, &r) in roots.iter().enumerate() {
        let v = b.value(r)?;
        let name = &source.value(source.outputs[k]).name;
        let reuse = !b.g.inputs.contains(&v)
            && !b.g.constants.contains_key(&v)
            && !outs.contains(&v)
            && b.g
                .values
                .iter()
                .enumerate()
                .all(|(i, x)| i == v.index() || &x.name != name);
        if reuse {
            b.g.values[v.index()].name = name.clone();
            outs.push(v);
        } else {
            let n = b.g.add_node(
                &format!("{name}/identity"),
                gopt_ir::Op::Shape(gopt_ir::ops::ShapeOp::Identity),
                Default::default(),
                vec![Some(v)],
                &[name],
            );
            outs.push(b.g.nodes[n.index()].outputs[0]);
        }
    }
    let consts = std::mem::take(&mut b.consts);
    let node_classes = std::mem::take(&mut b.node_classes);
    out.outputs = outs;
    Ok(Rebuilt {
        graph: out,
        consts,
        node_classes,
    })
}

/// A rebuilt graph whose constants are still in the e-graph's table.
#[derive(Debug)]
pub struct Rebuilt {
    /// The graph; constant values are declared but not yet filled.
    pub graph: Graph,
    /// Which constant-table entry each constant value takes.
    pub consts: Vec<(ValueId, u32)>,
    /// The class each op node was extracted from, by node name (what explanations of
    /// a kernel start from).
    pub node_classes: Vec<(String, Id)>,
}

impl Rebuilt {
    /// Fills the constants from the table (shared handles: nothing is copied).
    pub fn fill_constants(self, table: &[gopt_ir::Const]) -> Graph {
        let mut g = self.graph;
        for (v, i) in self.consts {
            if let Some(k) = table.get(i as usize) {
                g.constants.insert(v, k.clone());
            }
        }
        g
    }
}

/// Names by canonical class: when classes merged, the earliest-added class's name wins
/// (deterministic, so snapshots are stable).
fn canonical_names(eg: &Egraph, names: &HashMap<Id, String>) -> HashMap<Id, String> {
    let mut by_id: Vec<(&Id, &String)> = names.iter().collect();
    by_id.sort_by_key(|(id, _)| **id);
    let mut out = HashMap::new();
    for (id, name) in by_id {
        out.entry(eg.find(*id)).or_insert_with(|| name.clone());
    }
    out
}

struct Builder<'a> {
    eg: &'a Egraph,
    choice: &'a HashMap<Id, Term>,
    names: HashMap<Id, String>,
    made: HashMap<Id, Vec<ValueId>>,
    g: &'a mut Graph,
    count: usize,
    consts: Vec<(ValueId, u32)>,
    node_classes: Vec<(String, Id)>,
}

impl Builder<'_> {
    fn value(&mut self, id: Id) -> Result<ValueId> {
        let vs = self.values(id)?;
        match vs.as_slice() {
            [v] => Ok(*v),
            _ => Err(PassError::Internal(format!(
                "class {id} has {} values where one was expected",
                vs.len()
            ))),
        }
    }

    /// The IR values of a class, emitting its chosen node (and its inputs) first.
    fn values(&mut self, id: Id) -> Result<Vec<ValueId>> {
        let id = self.eg.find(id);
        if let Some(v) = self.made.get(&id) {
            return Ok(v.clone());
        }
        // Depth-first with an explicit stack: models are deep. `open` holds the classes
        // being expanded: meeting one again before it is made means the choice reads
        // itself (a cycle), an error rather than a walk that never ends.
        let mut stack = vec![(id, false)];
        let mut open = std::collections::HashSet::new();
        while let Some((c, ready)) = stack.pop() {
            if self.made.contains_key(&c) {
                continue;
            }
            let node = self
                .choice
                .get(&c)
                .ok_or_else(|| PassError::Internal(format!("class {c} has no chosen node")))?;
            let deps: Vec<Id> = match node {
                Term::Op(_, ch) => ch[1..].iter().map(|&x| self.eg.find(x)).collect(),
                Term::Out([_, n]) => vec![self.eg.find(*n)],
                Term::Leaf(_) => vec![],
            };
            let deps: Vec<Id> = deps
                .into_iter()
                .filter(|d| !crate::analysis::is_absent(self.eg, *d))
                .collect();
            if !ready {
                if !open.insert(c) {
                    return Err(PassError::Internal(format!(
                        "the extracted choice is cyclic at class {c}"
                    )));
                }
                stack.push((c, true));
                for d in deps.into_iter().rev() {
                    if !self.made.contains_key(&d) {
                        stack.push((d, false));
                    }
                }
                continue;
            }
            let vs = self.emit(c, node)?;
            open.remove(&c);
            self.made.insert(c, vs);
        }
        Ok(self.made[&id].clone())
    }

    fn name(&mut self, c: Id, op: &str) -> String {
        self.count += 1;
        match self.names.get(&c) {
            Some(n) => n.clone(),
            None => format!("{}_{}", op.to_lowercase(), self.count),
        }
    }

    fn emit(&mut self, c: Id, node: &Term) -> Result<Vec<ValueId>> {
        let eg = self.eg;
        match node {
            Term::Leaf(Leaf::Input(i)) => Ok(vec![self.g.inputs[*i as usize]]),
            Term::Leaf(Leaf::Const(i)) => {
                // The tensor is filled in by `fill_constants` once the e-graph is gone
                // (then it moves instead of being copied).
                let t = &eg.analysis.consts[*i as usize];
                let name = self.name(c, "const");
                let ty = TensorType::new(t.dtype(), gopt_ir::dim::shape_of(t.shape()));
                let v = self.g.add_value(&name, Some(ty));
                self.consts.push((v, *i));
                Ok(vec![v])
            }
            Term::Leaf(l) => Err(PassError::Internal(format!("leaf {l} chosen as a value"))),
            Term::Out([k, n]) => {
                let k =
                    int_of(eg, *k).ok_or_else(|| PassError::Internal("bad out index".into()))?;
                let vs = self.made[&eg.find(*n)].clone();
                vs.get(k as usize)
                    .map(|v| vec![*v])
                    .ok_or_else(|| PassError::Internal("out index out of range".into()))
            }
            Term::Op(OpKey(op, _), ch) => {
                let attrs = attrs_of(eg, ch[0])
                    .cloned()
                    .ok_or_else(|| PassError::Internal("op without attribute leaf".into()))?;
                let mut inputs = Vec::with_capacity(ch.len() - 1);
                for &x in &ch[1..] {
                    if crate::analysis::is_absent(eg, x) {
                        inputs.push(None);
                    } else {
                        inputs.push(Some(self.value(x)?));
                    }
                }
                let tys = &eg[c].data.tys;
                let base = self.name(c, op.name());
                let outs: Vec<String> = if tys.len() == 1 {
                    vec![base.clone()]
                } else {
                    (0..tys.len()).map(|k| format!("{base}:{k}")).collect()
                };
                let refs: Vec<&str> = outs.iter().map(String::as_str).collect();
                let n = self.g.add_node(&base, *op, attrs, inputs, &refs);
                self.node_classes.push((base, c));
                Ok(self.g.nodes[n.index()].outputs.clone())
            }
        }
    }
}
