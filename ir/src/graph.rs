//! The graph: arenas of values and nodes addressed by typed handles (as naga's
//! `Handle<T>` and Cranelift's `Value`), so passes rewrite by index instead of chasing
//! pointers. Constants (weights, folded shapes) are values with data attached.

use crate::attr::Attrs;
use crate::dim::Shape;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::konst::Const;
use crate::ops::Op;
use crate::tensor::Tensor;
use petgraph::graph::DiGraph;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;

/// Handle of a value in a graph's value arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// Handle of a node in a graph's node arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl ValueId {
    /// Arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NodeId {
    /// Arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Dtype and (possibly symbolic) shape of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Dims, symbolic where not yet bound.
    pub shape: Shape,
}

impl TensorType {
    /// Builds a type.
    pub fn new(dtype: DType, shape: Shape) -> Self {
        TensorType { dtype, shape }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, crate::dim::fmt_shape(&self.shape))
    }
}

/// A value: a graph input, a node output or a constant.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Name from the source model (kept for error messages and outputs).
    pub name: String,
    /// Type, once known (inputs and constants always; node outputs after inference).
    pub ty: Option<TensorType>,
}

/// One operation applied to values.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Name from the source model (may be empty there; importers make it unique).
    pub name: String,
    /// The operation.
    pub op: Op,
    /// Attributes in the op's normalised form.
    pub attrs: Attrs,
    /// Inputs; `None` is an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs.
    pub outputs: Vec<ValueId>,
}

/// A dataflow graph. Sub-graphs (control-flow bodies) are graphs too; the outer values
/// they read are listed in `captures` by the outer value's name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// Graph name.
    pub name: String,
    /// Value arena.
    pub values: Vec<Value>,
    /// Node arena (in topological order once verified).
    pub nodes: Vec<Node>,
    /// Graph inputs, in order (constants are not inputs).
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in order.
    pub outputs: Vec<ValueId>,
    /// Constant data of values that are constants (shared handles: cloning a graph
    /// copies no weight).
    pub constants: BTreeMap<ValueId, Const>,
    /// Values of a sub-graph that stand for outer-scope values of the same name.
    pub captures: Vec<ValueId>,
}

impl Graph {
    /// An empty graph.
    pub fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// Adds a value and returns its handle.
    pub fn add_value(&mut self, name: &str, ty: Option<TensorType>) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            name: name.to_string(),
            ty,
        });
        id
    }

    /// Adds a graph input.
    pub fn add_input(&mut self, name: &str, ty: TensorType) -> ValueId {
        let id = self.add_value(name, Some(ty));
        self.inputs.push(id);
        id
    }

    /// Adds a constant value holding `t` (a [`Tensor`] or a [`Const`]).
    pub fn add_const(&mut self, name: &str, t: impl Into<Const>) -> ValueId {
        let t = t.into();
        let ty = TensorType::new(t.dtype(), crate::dim::shape_of(t.shape()));
        let id = self.add_value(name, Some(ty));
        self.constants.insert(id, t);
        id
    }

    /// Adds a node with fresh output values named `outputs`; returns the node handle.
    pub fn add_node(
        &mut self,
        name: &str,
        op: Op,
        attrs: Attrs,
        inputs: Vec<Option<ValueId>>,
        outputs: &[&str],
    ) -> NodeId {
        let outs = outputs.iter().map(|o| self.add_value(o, None)).collect();
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            name: name.to_string(),
            op,
            attrs,
            inputs,
            outputs: outs,
        });
        id
    }

    /// A value by handle.
    pub fn value(&self, v: ValueId) -> &Value {
        &self.values[v.index()]
    }

    /// A node by handle.
    pub fn node(&self, n: NodeId) -> &Node {
        &self.nodes[n.index()]
    }

    /// The constant data of `v`, if it is a constant, decoded (and kept decoded: for
    /// weights, prefer [`Graph::konst`] and [`Const::write_le`]).
    pub fn constant(&self, v: ValueId) -> Option<&Tensor> {
        self.constants.get(&v).map(Const::tensor)
    }

    /// The constant handle of `v`, if it is a constant (nothing decoded).
    pub fn konst(&self, v: ValueId) -> Option<&Const> {
        self.constants.get(&v)
    }

    /// The decoded data of `v` when it is a constant small enough to read freely
    /// ([`crate::konst::SMALL_ELEMENTS`]) or decoded already: what shape inference and
    /// folding read, so they never decode a weight.
    pub fn small_constant(&self, v: ValueId) -> Option<&Tensor> {
        self.constants.get(&v).and_then(Const::small)
    }

    /// The type of `v`, or an error naming it.
    pub fn ty(&self, v: ValueId) -> Result<&TensorType> {
        self.value(v).ty.as_ref().ok_or_else(|| {
            IrError::Invalid(format!(
                "value `{}` ({v}) has no type yet",
                self.value(v).name
            ))
        })
    }

    /// Map from each value to the node and output slot that produces it.
    pub fn producers(&self) -> HashMap<ValueId, (NodeId, usize)> {
        let mut m = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for (k, o) in n.outputs.iter().enumerate() {
                m.insert(*o, (NodeId(i as u32), k));
            }
        }
        m
    }

    /// Map from each value to the nodes that read it.
    pub fn consumers(&self) -> HashMap<ValueId, Vec<NodeId>> {
        let mut m: HashMap<ValueId, Vec<NodeId>> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for v in n.inputs.iter().flatten() {
                m.entry(*v).or_default().push(NodeId(i as u32));
            }
        }
        m
    }

    /// Nodes in topological order, or an error naming a node on a cycle. The order is
    /// stable: among ready nodes the one earliest in the arena goes first, so a graph
    /// already in topological order keeps its order (printing relies on this).
    pub fn topo_order(&self) -> Result<Vec<NodeId>> {
        let prod = self.producers();
        let captured = self.capture_uses();
        let mut indegree = vec![0usize; self.nodes.len()];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for v in n.inputs.iter().flatten().chain(&captured[i]) {
                if let Some((p, _)) = prod.get(v) {
                    indegree[i] += 1;
                    users[p.index()].push(i);
                }
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = (0..self.nodes.len())
            .filter(|&i| indegree[i] == 0)
            .map(Reverse)
            .collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(NodeId(i as u32));
            for &u in &users[i] {
                indegree[u] -= 1;
                if indegree[u] == 0 {
                    ready.push(Reverse(u));
                }
            }
        }
        if order.len() == self.nodes.len() {
            return Ok(order);
        }
        // A cycle: let petgraph name a node on it.
        let mut g = DiGraph::<NodeId, ()>::with_capacity(self.nodes.len(), self.nodes.len());
        let idx: Vec<_> = (0..self.nodes.len())
            .map(|i| g.add_node(NodeId(i as u32)))
            .collect();
        for (i, n) in self.nodes.iter().enumerate() {
            for v in n.inputs.iter().flatten().chain(&captured[i]) {
                if let Some((p, _)) = prod.get(v) {
                    g.add_edge(idx[p.index()], idx[i], ());
                }
            }
        }
        let culprit = match petgraph::algo::toposort(&g, None) {
            Err(c) => g[c.node_id()].index(),
            Ok(_) => order.len().min(self.nodes.len().saturating_sub(1)),
        };
        let n = &self.nodes[culprit];
        Err(IrError::Invalid(format!(
            "cycle through node `{}` ({})",
            n.name, n.op
        )))
    }

    /// Per node, the values of this graph its sub-graphs read by capture (matched by
    /// name): uses that `Node::inputs` does not list, which ordering and liveness must
    /// count.
    pub fn capture_uses(&self) -> Vec<Vec<ValueId>> {
        let mut uses = vec![Vec::new(); self.nodes.len()];
        if self.nodes.iter().all(|n| n.attrs.graphs().next().is_none()) {
            return uses;
        }
        let by_name: HashMap<&str, ValueId> = self
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.name.as_str(), ValueId(i as u32)))
            .collect();
        for (n, u) in self.nodes.iter().zip(&mut uses) {
            for (_, sub) in n.attrs.graphs() {
                u.extend(
                    sub.captures
                        .iter()
                        .filter_map(|&c| by_name.get(sub.value(c).name.as_str()).copied()),
                );
            }
        }
        uses
    }

    /// Reorders the node arena topologically (handles of nodes change, values do not).
    pub fn sort_nodes(&mut self) -> Result<()> {
        let order = self.topo_order()?;
        let mut old: Vec<Option<Node>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        self.nodes = order
            .into_iter()
            .filter_map(|i| old[i.index()].take())
            .collect();
        Ok(())
    }

    /// Looks a value up by name (linear; for tests and tools).
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.values
            .iter()
            .position(|v| v.name == name)
            .map(|i| ValueId(i as u32))
    }

    /// Removes nodes whose outputs nobody reads and that are not graph outputs, and
    /// constants nobody reads; then compacts the arenas (handles are renumbered).
    pub fn prune(&mut self) {
        let mut live = vec![false; self.values.len()];
        for o in &self.outputs {
            live[o.index()] = true;
        }
        for i in &self.inputs {
            live[i.index()] = true;
        }
        for c in &self.captures {
            live[c.index()] = true;
        }
        let mut keep = vec![false; self.nodes.len()];
        let captured = self.capture_uses();
        // Nodes are in topological order after verification; walk backwards to a fixpoint.
        loop {
            let mut changed = false;
            for (i, n) in self.nodes.iter().enumerate().rev() {
                if !keep[i] && n.outputs.iter().any(|o| live[o.index()]) {
                    keep[i] = true;
                    changed = true;
                    for v in n.inputs.iter().flatten().chain(&captured[i]) {
                        live[v.index()] = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let nodes: Vec<Node> = std::mem::take(&mut self.nodes)
            .into_iter()
            .zip(keep)
            .filter_map(|(n, k)| k.then_some(n))
            .collect();
        self.nodes = nodes;
        for n in &self.nodes {
            for o in &n.outputs {
                live[o.index()] = true;
            }
        }
        self.compact(&live);
    }

    /// Renumbers values so that only those marked live remain, in their current order.
    fn compact(&mut self, live: &[bool]) {
        let mut map = vec![None; self.values.len()];
        let mut values = Vec::new();
        for (i, v) in std::mem::take(&mut self.values).into_iter().enumerate() {
            if live[i] {
                map[i] = Some(ValueId(values.len() as u32));
                values.push(v);
            }
        }
        self.values = values;
        let m = |v: ValueId| map[v.index()].expect("live value kept");
        for n in &mut self.nodes {
            for i in n.inputs.iter_mut().flatten() {
                *i = m(*i);
            }
            for o in &mut n.outputs {
                *o = m(*o);
            }
        }
        self.inputs = self.inputs.iter().map(|&v| m(v)).collect();
        self.outputs = self.outputs.iter().map(|&v| m(v)).collect();
        self.captures = self.captures.iter().map(|&v| m(v)).collect();
        self.constants = std::mem::take(&mut self.constants)
            .into_iter()
            .filter_map(|(k, t)| map[k.index()].map(|nk| (nk, t)))
            .collect();
    }

    /// Number of parameters (elements of float constants) and bytes of all constants.
    pub fn weight_stats(&self) -> (usize, usize) {
        let params = self
            .constants
            .values()
            .filter(|t| t.dtype().is_float())
            .map(|t| t.len())
            .sum();
        let bytes = self.constants.values().map(|t| t.byte_size()).sum();
        (params, bytes)
    }
}

/// A model: the main graph plus descriptive metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    /// The main graph.
    pub graph: Graph,
    /// Free-form metadata (producer, source opsets, ...), sorted for stable printing.
    pub meta: BTreeMap<String, String>,
}
