//! Why a kernel looks the way it does: the chain of rewrites that turned the imported
//! nodes into the extracted kernel, with the estimated cost at each step
//! (`gopt compile --explain-node`, report.md).
//!
//! When [`crate::Config::explain`] is set, the e-graph records egg's explanations: every
//! e-node ever added keeps an id, and every union its justification (a rule's name). egg's
//! own explanations expand terms as trees down to the leaves, which for a kernel is the
//! whole network before it, exponential in a residual stream. So this module walks the
//! proof forest itself and never leaves the kernel's *region*: the classes between the
//! kernel's output class and its inputs (the classes of the extracted node's children).
//! In one class, the path from the imported e-node to the extracted one is a shortest path
//! over rule unions and congruence (same op, equivalent children); a congruence step whose
//! children differ inside the region is explained in the child's class, recursively. A
//! step is the rule that fired and the region's form after it, with its estimated cost:
//! the sum of the cost model's estimate over the region's nodes. Depth, form size and step
//! count are bounded by named constants, so a chain costs the same on any model.

use crate::analysis::{attrs_of, is_absent, Egraph, Facts};
use crate::convert::Loaded;
use crate::cost::{kind, node_cost, Kind, Target};
use crate::lang::{Leaf, Term};
use crate::Result;
use egg::{Id, Language, Symbol};
use gopt_ir::{Graph, TensorType, ValueId};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

/// The deepest a form reaches below the kernel's output class (deeper classes print as `…`).
pub const MAX_DEPTH: usize = 4;
/// The most op nodes one form prints (further ones print as `…`).
pub const MAX_FORM_NODES: usize = 24;
/// The most steps one chain holds; a longer chain is cut and says so.
pub const MAX_STEPS: usize = 32;
/// The first step of a chain whose kernel the importer added.
pub const IMPORTED: &str = "imported";

/// One step of a chain: the rule that fired and the kernel's region after it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChainStep {
    /// The rule's name (`fuse-matmul-bias`); [`IMPORTED`] for the first step; `(reversed)`
    /// after a rule used right to left.
    pub rule: String,
    /// The region after the step: ops with their inputs, the kernel's inputs as `<Op>`,
    /// graph inputs by name, constants as `const`.
    pub form: String,
    /// Estimated time of the region's nodes, µs.
    pub est_us: f64,
}

/// The rewrites behind one kernel of the optimized graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chain {
    /// The kernel's node name.
    pub kernel: String,
    /// From the imported form to the extracted kernel.
    pub steps: Vec<ChainStep>,
    /// Set when the chain hit [`MAX_STEPS`] and was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Chain {
    /// The chain as text: one line per step, the rule, the cost and the form.
    pub fn render(&self) -> String {
        let width = self.steps.iter().map(|s| s.rule.len()).max().unwrap_or(0);
        let mut s = format!("{}:\n", self.kernel);
        for st in &self.steps {
            s += &format!(
                "  {:<width$}  {:>9.2} µs  {}\n",
                st.rule, st.est_us, st.form
            );
        }
        if self.truncated {
            s += &format!("  (cut at {MAX_STEPS} steps)\n");
        }
        s
    }
}

/// Every chain as a Markdown section body (report.md): one code block per kernel.
pub fn render_markdown(chains: &[Chain]) -> String {
    let mut s = String::new();
    for c in chains {
        s += "```text\n";
        s += &c.render();
        s += "```\n\n";
    }
    s
}

/// Adds a graph to a fresh e-graph that records explanations (else as
/// [`crate::convert::to_egraph_parts`]). Also returns how many e-node ids the import made:
/// the ids below it are the imported nodes.
pub fn to_egraph_explained(
    g: &Graph,
    consts: BTreeMap<ValueId, gopt_ir::Const>,
) -> Result<(Loaded, usize)> {
    let inputs: Vec<TensorType> = g
        .inputs
        .iter()
        .map(|&v| g.ty(v).cloned())
        .collect::<std::result::Result<_, _>>()?;
    let mut eg = Egraph::new(Facts::new(inputs))
        .with_explanations_enabled()
        .without_explanation_length_optimization();
    let (roots, names, node_terms, pinned) = crate::convert::add_parts(&mut eg, g, consts)?;
    eg.analysis.roots = roots.clone();
    eg.rebuild();
    let imported = eg.nodes().len();
    Ok((
        Loaded {
            egraph: eg,
            roots,
            names,
            node_terms,
            pinned,
        },
        imported,
    ))
}

/// One hop of a path inside a class.
#[derive(Clone, Copy, Debug)]
enum Hop {
    /// A rule's union (forward: the rule rewrote `from` into `to`).
    Rule(Symbol, bool),
    /// Same op, equivalent children.
    Congruence,
}

/// The proof forest of a saturated e-graph, indexed for walking one class at a time.
pub struct Proofs<'a> {
    eg: &'a Egraph,
    target: &'a Target,
    imported: usize,
    /// E-node ids by canonical class, ascending.
    members: HashMap<Id, Vec<Id>>,
    /// Rule unions by e-node id: (other id, rule, forward).
    edges: HashMap<Id, Vec<(Id, Symbol, bool)>>,
    /// The e-node ids that read each canonical class.
    parents: HashMap<Id, Vec<Id>>,
    /// Graph input names, by input number.
    inputs: Vec<String>,
    /// The extracted node of each class (how a kernel's inputs are labelled).
    choice: &'a HashMap<Id, Term>,
}

impl<'a> Proofs<'a> {
    /// Indexes `eg`'s explanations; `None` when it did not record them. `imported`: the
    /// number of e-node ids the import made ([`to_egraph_explained`]); `inputs`: the
    /// graph's input names; `choice`: the extracted node of each class.
    pub fn new(
        eg: &'a Egraph,
        target: &'a Target,
        imported: usize,
        inputs: Vec<String>,
        choice: &'a HashMap<Id, Term>,
    ) -> Option<Proofs<'a>> {
        if !eg.are_explanations_enabled() {
            return None;
        }
        let mut members: HashMap<Id, Vec<Id>> = HashMap::new();
        let mut parents: HashMap<Id, Vec<Id>> = HashMap::new();
        for (i, n) in eg.nodes().iter().enumerate() {
            let id = Id::from(i);
            members.entry(eg.find(id)).or_default().push(id);
            for &c in n.children() {
                parents.entry(eg.find(c)).or_default().push(id);
            }
        }
        let mut edges: HashMap<Id, Vec<(Id, Symbol, bool)>> = HashMap::new();
        for (a, b, rule) in eg.get_union_equalities() {
            edges.entry(a).or_default().push((b, rule, true));
            edges.entry(b).or_default().push((a, rule, false));
        }
        for v in edges.values_mut() {
            v.sort_by_key(|(id, r, fwd)| (*id, r.as_str().to_string(), !*fwd));
        }
        Some(Proofs {
            eg,
            target,
            imported,
            members,
            edges,
            parents,
            inputs,
            choice,
        })
    }

    /// The chain of the kernel `name`, extracted as `chosen` in `class`.
    pub fn chain(&self, name: &str, class: Id, chosen: &Term) -> Chain {
        let class = self.eg.find(class);
        let boundary: HashSet<Id> = chosen.children().iter().map(|&c| self.eg.find(c)).collect();
        let mut w = Walk {
            p: self,
            root: class,
            boundary,
            cur: HashMap::new(),
            steps: Vec::new(),
            truncated: false,
            collapsed: HashSet::new(),
        };
        let goal = self.canon(chosen);
        let target = self
            .ids(class)
            .iter()
            .copied()
            .find(|&i| self.canon_of(i) == goal);
        let start =
            self.ids(class).iter().copied().find(|&i| {
                usize::from(i) < self.imported && !matches!(self.node(i), Term::Leaf(_))
            });
        match (start, target) {
            (Some(a), Some(b)) => {
                w.cur.insert(class, a);
                w.push(IMPORTED.to_string());
                w.explain(class, a, b, 0);
            }
            (None, Some(b)) => {
                w.cur.insert(class, b);
                w.push(self.introduced_by(class));
            }
            (_, None) => {
                // The choice is not among the recorded nodes (cannot happen for a choice
                // of this e-graph): show the extracted form alone.
                if let Some(&b) = self.ids(class).first() {
                    w.cur.insert(class, b);
                }
                w.push(IMPORTED.to_string());
            }
        }
        Chain {
            kernel: name.to_string(),
            steps: w.steps,
            truncated: w.truncated,
        }
    }

    fn ids(&self, class: Id) -> &[Id] {
        self.members.get(&class).map_or(&[], Vec::as_slice)
    }

    fn node(&self, id: Id) -> &Term {
        &self.eg.nodes()[usize::from(id)]
    }

    fn canon(&self, t: &Term) -> Term {
        t.clone().map_children(|c| self.eg.find(c))
    }

    fn canon_of(&self, id: Id) -> Term {
        self.canon(self.node(id))
    }

    /// `introduced by RULE` for a class no imported node is in: the rule whose union
    /// sits on the nearest parent (a few levels up) of the class's first node.
    fn introduced_by(&self, class: Id) -> String {
        let mut frontier: Vec<Id> = vec![class];
        let mut seen: HashSet<Id> = [class].into();
        for _ in 0..4 {
            let mut up = Vec::new();
            for c in &frontier {
                for &id in self.parents.get(c).into_iter().flatten() {
                    if let Some((_, rule, _)) = self.edges.get(&id).and_then(|e| e.first()) {
                        return format!("introduced by {}", rule_name(*rule));
                    }
                    let p = self.eg.find(id);
                    if seen.insert(p) {
                        up.push(p);
                    }
                }
            }
            frontier = up;
        }
        "introduced".to_string()
    }

    /// The cheapest path from `a` to `b` (ids of one class) over rule unions and
    /// congruence; empty when they are the same id or no path is recorded.
    fn path(&self, class: Id, a: Id, b: Id) -> Vec<(Id, Id, Hop)> {
        if a == b {
            return Vec::new();
        }
        let ids = self.ids(class);
        let mut groups: BTreeMap<Term, Vec<Id>> = BTreeMap::new();
        for &i in ids {
            groups.entry(self.canon_of(i)).or_default().push(i);
        }
        let group_of: HashMap<Id, &Vec<Id>> = groups
            .values()
            .flat_map(|g| g.iter().map(move |&i| (i, g)))
            .collect();
        // Cheapest path: congruence before rules, rules used right to left (which pass
        // through forms no rule produced) last; ties go to the lower id.
        let mut prev: HashMap<Id, (Id, Hop)> = HashMap::new();
        let mut dist: HashMap<Id, u32> = [(a, 0)].into();
        let mut heap = BinaryHeap::from([Reverse((0u32, a))]);
        while let Some(Reverse((d, u))) = heap.pop() {
            if u == b {
                break;
            }
            if dist.get(&u).is_some_and(|&best| best < d) {
                continue;
            }
            let rules = self.edges.get(&u).into_iter().flatten();
            let rules = rules.map(|&(v, r, fwd)| (v, Hop::Rule(r, fwd)));
            let congruent = group_of
                .get(&u)
                .into_iter()
                .flat_map(|g| g.iter())
                .map(|&v| (v, Hop::Congruence));
            for (v, hop) in congruent.chain(rules) {
                let w = match hop {
                    Hop::Congruence => 1,
                    Hop::Rule(_, true) => 2,
                    Hop::Rule(_, false) => 8,
                };
                let nd = d + w;
                if self.eg.find(v) == class && dist.get(&v).map_or(true, |&old| nd < old) {
                    dist.insert(v, nd);
                    prev.insert(v, (u, hop));
                    heap.push(Reverse((nd, v)));
                }
            }
        }
        let mut path = Vec::new();
        let mut at = b;
        while let Some(&(u, hop)) = prev.get(&at) {
            path.push((u, at, hop));
            at = u;
        }
        path.reverse();
        path
    }
}

/// The readable name of a union's justification: rule names as they are; unions made by
/// code outside a rule (egg records their source location) by what that code does.
fn rule_name(r: Symbol) -> String {
    let s = r.as_str();
    if s.contains("analysis.rs") {
        "fold-constant".to_string()
    } else if s.contains("fusion.rs") {
        "fuse-sibling-matmul".to_string()
    } else {
        s.to_string()
    }
}

/// One chain being built: the current e-node of each region class, and the steps so far.
struct Walk<'p, 'a> {
    p: &'p Proofs<'a>,
    root: Id,
    boundary: HashSet<Id>,
    cur: HashMap<Id, Id>,
    steps: Vec<ChainStep>,
    truncated: bool,
    /// Rule hops already followed into the left side's sub-term (see [`Walk::inner`]).
    collapsed: HashSet<(Id, Id)>,
}

impl Walk<'_, '_> {
    /// A node within two levels below `u` that is in `class` (`u`'s own class): the
    /// sub-term a rule rewrote `u` into, when its right side is part of its left.
    fn inner(&self, u: Id, class: Id) -> Option<Id> {
        let mut level = vec![u];
        for _ in 0..2 {
            let next: Vec<Id> = level
                .iter()
                .flat_map(|&n| self.p.node(n).children().to_vec())
                .collect();
            if let Some(&x) = next.iter().find(|&&x| self.p.eg.find(x) == class) {
                return Some(x);
            }
            level = next;
        }
        None
    }

    /// Appends the current form as a step.
    fn push(&mut self, rule: String) {
        if self.steps.len() >= MAX_STEPS {
            self.truncated = true;
            return;
        }
        let mut f = FormState {
            budget: MAX_FORM_NODES,
            costed: HashSet::new(),
            cost: 0.0,
        };
        let root = self.cur.get(&self.root).copied().unwrap_or(self.root);
        let form = self.form(self.root, root, 0, &mut f);
        self.steps.push(ChainStep {
            rule,
            form,
            est_us: f.cost * 1e6,
        });
    }

    /// Whether `class`, at `depth` below the root, is inside the region (printed, costed
    /// and explained).
    fn inside(&self, class: Id, depth: usize) -> bool {
        class != self.root
            && depth < MAX_DEPTH
            && !self.boundary.contains(&class)
            && !self.is_leaf(class)
    }

    /// Explains `a` → `b` (ids of `class`, at `depth` below the root), pushing a step per
    /// rule.
    fn explain(&mut self, class: Id, a: Id, b: Id, depth: usize) {
        for (u, v, hop) in self.p.path(class, a, b) {
            if self.truncated {
                return;
            }
            match hop {
                Hop::Rule(rule, forward) => {
                    let name = match forward {
                        true => rule_name(rule),
                        false => format!("{} (reversed)", rule_name(rule)),
                    };
                    let inner = forward
                        .then(|| self.inner(u, class))
                        .flatten()
                        .filter(|&x| x != v && self.collapsed.insert((u, v)));
                    if let Some(x) = inner {
                        // A rule whose right side is a sub-term of its left
                        // (`Reshape(x) -> x`): egg joins the left side to whichever node
                        // led x's class, so the chain goes on from x's own node.
                        self.cur.insert(class, x);
                        self.push(name);
                        self.explain(class, x, b, depth);
                        return;
                    }
                    self.cur.insert(class, v);
                    self.push(name);
                }
                Hop::Congruence => {
                    let (from, to) = (self.p.node(u).clone(), self.p.node(v).clone());
                    for (&x, &y) in from.children().iter().zip(to.children()) {
                        let child = self.p.eg.find(x);
                        let x = self.cur.get(&child).copied().unwrap_or(x);
                        if x != y && child != class && self.inside(child, depth + 1) {
                            self.cur.insert(child, x);
                            self.explain(child, x, y, depth + 1);
                        }
                        self.cur.insert(child, y);
                    }
                    self.cur.insert(class, v);
                }
            }
        }
    }

    /// The form of `class` (its current e-node, else `id`, and the region below it),
    /// adding the cost of each region node once to `cost`.
    fn form(&self, class: Id, id: Id, depth: usize, f: &mut FormState) -> String {
        let eg = self.p.eg;
        let id = self.cur.get(&class).copied().unwrap_or(id);
        let node = self.p.node(id);
        if f.budget == 0 {
            return "…".to_string();
        }
        f.budget -= 1;
        if f.costed.insert(class) {
            let c = node_cost(self.p.target, eg, class, &self.p.canon(node));
            if c.is_finite() {
                f.cost += c;
            }
        }
        let kids: Vec<String> = match node {
            Term::Leaf(_) => return self.label(class),
            Term::Out([k, n]) => {
                let k = crate::analysis::int_of(eg, *k).unwrap_or(0);
                return format!("{}.{k}", self.child(*n, depth, f));
            }
            Term::Op(_, _) => node
                .op_inputs()
                .iter()
                .filter(|&&c| !is_absent(eg, c))
                .map(|&c| self.child(c, depth, f))
                .collect(),
        };
        format!("{}({})", op_label(eg, node), kids.join(", "))
    }

    /// An input of a node at `depth`: inside the region its form, else its label.
    fn child(&self, id: Id, depth: usize, f: &mut FormState) -> String {
        let class = self.p.eg.find(id);
        if class == self.root || self.boundary.contains(&class) || self.is_leaf(class) {
            self.label(class)
        } else if depth + 1 >= MAX_DEPTH {
            "…".to_string()
        } else {
            self.form(class, id, depth + 1, f)
        }
    }

    fn is_leaf(&self, class: Id) -> bool {
        self.p.eg[class]
            .nodes
            .iter()
            .all(|n| matches!(n, Term::Leaf(_)))
    }

    /// A class outside the region: a graph input by name, `const`, or `<Op>` of the node
    /// extracted for it.
    fn label(&self, class: Id) -> String {
        let nodes = &self.p.eg[class].nodes;
        for n in nodes {
            match n {
                Term::Leaf(Leaf::Input(i)) => {
                    return self
                        .p
                        .inputs
                        .get(*i as usize)
                        .cloned()
                        .unwrap_or_else(|| format!("in{i}"))
                }
                Term::Leaf(Leaf::Const(_)) => return "const".to_string(),
                Term::Leaf(_) | Term::Out(_) | Term::Op(..) => {}
            }
        }
        let chosen = self.p.choice.get(&class);
        match chosen.or_else(|| nodes.iter().find(|n| matches!(n, Term::Op(..)))) {
            Some(n @ Term::Op(..)) => format!("<{}>", op_label(self.p.eg, n)),
            Some(Term::Out([_, n])) => match self.p.choice.get(&self.p.eg.find(*n)) {
                Some(m @ Term::Op(..)) => format!("<{}>", op_label(self.p.eg, m)),
                Some(_) | None => "<out>".to_string(),
            },
            Some(Term::Leaf(_)) | None => "<out>".to_string(),
        }
    }
}

/// What one form being printed has used: its node budget, the classes costed, the cost.
struct FormState {
    budget: usize,
    costed: HashSet<Id>,
    cost: f64,
}

/// An op e-node's name, with a fused GEMM/conv's activation (`FusedMatMul{gelu}`).
fn op_label(eg: &Egraph, n: &Term) -> String {
    let Term::Op(key, _) = n else {
        return String::new();
    };
    let act = n
        .attrs_class()
        .and_then(|a| attrs_of(eg, a))
        .and_then(|a| a.str_or("activation", "none").ok().map(str::to_string))
        .filter(|a| a != "none");
    match act {
        Some(a) => format!("{key}{{{a}}}"),
        None => key.to_string(),
    }
}

/// The chains of every kernel of an extracted graph that a rewrite changed (kernels that
/// are their imported node unchanged are left out); empty when `eg` did not record
/// explanations. `imported`: as [`Proofs::new`]; `source`: the graph that was loaded.
pub fn chains(
    eg: &Egraph,
    target: &Target,
    imported: usize,
    choice: &HashMap<Id, Term>,
    rebuilt: &crate::convert::Rebuilt,
    source: &Graph,
) -> Vec<Chain> {
    let inputs = source
        .inputs
        .iter()
        .map(|&v| source.value(v).name.clone())
        .collect();
    let Some(proofs) = Proofs::new(eg, target, imported, inputs, choice) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, class) in &rebuilt.node_classes {
        let Some(chosen) = choice.get(&eg.find(*class)) else {
            continue;
        };
        if chosen.op().map_or(true, |op| kind(op) == Kind::Free) {
            continue;
        }
        let chain = proofs.chain(name, *class, chosen);
        let rewritten = chain.steps.first().is_some_and(|s| s.rule != IMPORTED);
        if rewritten || chain.steps.len() > 1 {
            out.push(chain);
        }
    }
    out
}
