//! Extraction: one e-node per e-class, minimising the total estimated time of the graph.
//!
//! Greedy extraction with tree costs (egg's `Extractor`) counts a shared sub-term once
//! per use, so it can never prefer one merged GEMM read by three slices (Q/K/V) over
//! three GEMMs, and it overcharges every residual connection. This is the DAG-aware
//! greedy of extraction-gym ("faster-greedy-dag"): each class's best candidate carries the
//! *set* of classes its sub-graph needs (a bitset), and its cost is the sum of each
//! member's own cost once. Candidates are re-evaluated from a worklist of parents until
//! no choice improves. Limits: still greedy — a class picks the candidate that is best
//! for its own sub-graph, not jointly with its siblings' choices, and a member's own cost
//! is that of its current choice; an ILP (egg's `LpExtractor`) would be exact but takes
//! seconds on whole models. Ties keep the earlier choice, so extraction is
//! deterministic for a given e-graph.
//!
//! Greedy alone never merges sibling GEMMs: each of Q, K and V is cheaper as its own
//! GEMM than as a slice of the merged one, and the saving only appears where they meet.
//! So a bounded local search follows: it recomputes the whole graph's cost for moves of
//! one class to another candidate and for *group moves* (every member of a sibling
//! merge switched to its slice at once: the groups the rule recorded, and every set of
//! classes holding views of one common class, which also covers merges that other
//! rewrites reached, such as casts moved into the slices; then each reader of a member
//! switched to the node that reads it, where that lowers the total: a SwiGLU of the
//! gate and up projections, a cast of V's slice), keeping a move only when the total
//! drops, for a few passes.

use crate::analysis::Egraph;
use crate::cost::{node_cost, Target};
use crate::lang::Term;
use egg::{Id, Language};
use fixedbitset::FixedBitSet;
use gopt_ir::ops::ShapeOp;
use gopt_ir::Op;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

/// The chosen node of every reachable class, and the estimated total time.
#[derive(Debug)]
pub struct Extraction {
    /// Chosen node per canonical class.
    pub choice: HashMap<Id, Term>,
    /// Estimated seconds of the graph reachable from the roots.
    pub total: f64,
    /// The deadline of [`extract_until`] passed first: `choice` is empty.
    pub timed_out: bool,
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() > d)
}

struct Best {
    node: usize,
    own: f64,
    set: FixedBitSet,
    total: f64,
}

/// Extracts the graph reachable from `roots`.
pub fn extract(eg: &Egraph, t: &Target, roots: &[Id]) -> Extraction {
    extract_until(eg, t, roots, None)
}

/// [`extract`], giving up (`timed_out`, no choice) once `deadline` passes: its cost
/// grows faster than the e-graph, so a compile's time limit is checked inside it.
pub fn extract_until(
    eg: &Egraph,
    t: &Target,
    roots: &[Id],
    deadline: Option<Instant>,
) -> Extraction {
    let gave_up = || Extraction {
        choice: HashMap::new(),
        total: f64::INFINITY,
        timed_out: true,
    };
    let classes: Vec<Id> = eg.classes().map(|c| c.id).collect();
    let index: HashMap<Id, usize> = classes.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let n = classes.len();
    // parents[i]: (class, node) pairs that read class i.
    let mut parents: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut own: Vec<Vec<f64>> = Vec::with_capacity(n);
    for (ci, &c) in classes.iter().enumerate() {
        let mut costs = Vec::new();
        for (ni, node) in eg[c].nodes.iter().enumerate() {
            costs.push(node_cost(t, eg, c, node));
            for &ch in node_children(node) {
                parents[index[&eg.find(ch)]].push((ci, ni));
            }
        }
        own.push(costs);
    }
    let mut best: Vec<Option<Best>> = (0..n).map(|_| None).collect();
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    for (ci, &c) in classes.iter().enumerate() {
        for (ni, node) in eg[c].nodes.iter().enumerate() {
            if node_children(node).is_empty() {
                queue.push_back((ci, ni));
            }
        }
    }
    let mut seen_rounds = 0usize;
    let limit = 64 * eg.total_number_of_nodes().max(1);
    while let Some((ci, ni)) = queue.pop_front() {
        seen_rounds += 1;
        if seen_rounds > limit {
            break;
        }
        if seen_rounds % 256 == 0 && past(deadline) {
            return gave_up();
        }
        let c = classes[ci];
        let node = &eg[c].nodes[ni];
        let cost = own[ci][ni];
        if !cost.is_finite() {
            continue;
        }
        let mut set = FixedBitSet::with_capacity(n);
        let mut ok = true;
        for &ch in node_children(node) {
            match &best[index[&eg.find(ch)]] {
                Some(b) => set.union_with(&b.set),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok || set.contains(ci) {
            continue;
        }
        set.insert(ci);
        let total: f64 = set
            .ones()
            .map(|k| {
                if k == ci {
                    cost
                } else {
                    best[k].as_ref().map_or(0.0, |b| b.own)
                }
            })
            .sum();
        let better = match &best[ci] {
            None => true,
            Some(b) => total < b.total * (1.0 - 1e-9) - 1e-15,
        };
        if better {
            best[ci] = Some(Best {
                node: ni,
                own: cost,
                set,
                total,
            });
            for &p in &parents[ci] {
                queue.push_back(p);
            }
        }
    }
    let mut pick: Vec<usize> = best
        .iter()
        .map(|b| b.as_ref().map_or(usize::MAX, |b| b.node))
        .collect();
    // Each node's children as class indices, once: the local search walks the chosen
    // graph thousands of times.
    let kids: Vec<Vec<Vec<usize>>> = classes
        .iter()
        .map(|&c| {
            eg[c]
                .nodes
                .iter()
                .map(|n| {
                    node_children(n)
                        .iter()
                        .map(|ch| index[&eg.find(*ch)])
                        .collect()
                })
                .collect()
        })
        .collect();
    let cx = Search {
        eg,
        classes: &classes,
        index: &index,
        own: &own,
        kids: &kids,
        parents: &parents,
    };
    let root_ix: Vec<usize> = roots.iter().map(|r| index[&eg.find(*r)]).collect();
    // The greedy's sets can be stale when a child's choice changed after its parents
    // were priced, which may close a cycle (a view of a view of itself): start over from
    // choices that each read only classes settled before them.
    if !cx.total(&root_ix, &pick).is_finite() {
        pick = acyclic_pick(eg, &classes, &index, &own, &parents);
    }
    if !cx.refine(&root_ix, &mut pick, deadline) {
        return gave_up();
    }
    let mut choice = HashMap::new();
    let mut stack: Vec<usize> = root_ix.clone();
    while let Some(ci) = stack.pop() {
        let c = classes[ci];
        if choice.contains_key(&c) || pick[ci] == usize::MAX {
            continue;
        }
        let node = eg[c].nodes[pick[ci]].clone();
        for &ch in node_children(&node) {
            stack.push(index[&eg.find(ch)]);
        }
        choice.insert(c, node);
    }
    let total = cx.total(&root_ix, &pick);
    Extraction {
        choice,
        total,
        timed_out: false,
    }
}

/// A choice per class that is acyclic by construction, cheapest first (Knuth's
/// generalization of Dijkstra): a node becomes a candidate only once every class it reads
/// is settled, priced as the sum of the own costs of the classes its sub-graph needs
/// (each once); the cheapest candidate settles its class. Classes no candidate reaches
/// keep `usize::MAX`.
fn acyclic_pick(
    eg: &Egraph,
    classes: &[Id],
    index: &HashMap<Id, usize>,
    own: &[Vec<f64>],
    parents: &[Vec<(usize, usize)>],
) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    /// An f64 ordered for the heap (costs are never NaN: infinite ones are skipped).
    struct Cost(f64);
    impl PartialEq for Cost {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o).is_eq()
        }
    }
    impl Eq for Cost {}
    impl PartialOrd for Cost {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Cost {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&o.0)
        }
    }
    let n = classes.len();
    let kids = |ci: usize, ni: usize| -> Vec<usize> {
        let mut k: Vec<usize> = node_children(&eg[classes[ci]].nodes[ni])
            .iter()
            .map(|c| index[&eg.find(*c)])
            .collect();
        k.sort_unstable();
        k.dedup();
        k
    };
    let mut pending: Vec<Vec<usize>> = (0..n)
        .map(|ci| (0..own[ci].len()).map(|ni| kids(ci, ni).len()).collect())
        .collect();
    let mut pick = vec![usize::MAX; n];
    let mut sets: Vec<Option<FixedBitSet>> = (0..n).map(|_| None).collect();
    let mut heap = BinaryHeap::new();
    let price = |ci: usize, ni: usize, pick: &[usize], sets: &[Option<FixedBitSet>]| {
        let mut set = FixedBitSet::with_capacity(n);
        for k in kids(ci, ni) {
            if let Some(s) = &sets[k] {
                set.union_with(s);
            }
        }
        set.insert(ci);
        let total: f64 = set
            .ones()
            .map(|k| {
                if k == ci {
                    own[ci][ni]
                } else {
                    own[k][pick[k]]
                }
            })
            .sum();
        (total, set)
    };
    for ci in 0..n {
        for ni in 0..own[ci].len() {
            if pending[ci][ni] == 0 && own[ci][ni].is_finite() {
                heap.push(Reverse((Cost(own[ci][ni]), ci, ni)));
            }
        }
    }
    while let Some(Reverse((_, ci, ni))) = heap.pop() {
        if pick[ci] != usize::MAX {
            continue;
        }
        let (_, set) = price(ci, ni, &pick, &sets);
        pick[ci] = ni;
        sets[ci] = Some(set);
        // `parents` lists a node once per child slot: count each reader once.
        let mut readers = parents[ci].clone();
        readers.sort_unstable();
        readers.dedup();
        for (pc, pn) in readers {
            if pick[pc] != usize::MAX || pending[pc][pn] == 0 {
                continue;
            }
            pending[pc][pn] -= 1;
            if pending[pc][pn] == 0 && own[pc][pn].is_finite() {
                let (total, _) = price(pc, pn, &pick, &sets);
                heap.push(Reverse((Cost(total), pc, pn)));
            }
        }
    }
    pick
}

/// Passes of the local search.
pub const REFINE_PASSES: usize = 3;

struct Search<'a> {
    eg: &'a Egraph,
    classes: &'a [Id],
    index: &'a HashMap<Id, usize>,
    own: &'a [Vec<f64>],
    /// `kids[class][node]`: the node's children as class indices.
    kids: &'a [Vec<Vec<usize>>],
    /// `parents[class]`: the (class, node) pairs that read the class.
    parents: &'a [Vec<(usize, usize)>],
}

impl Search<'_> {
    /// Total cost of the graph reachable from `roots` under `pick`; infinite on a cycle
    /// or a class without a choice.
    fn total(&self, roots: &[usize], pick: &[usize]) -> f64 {
        let n = self.classes.len();
        let mut state = vec![0u8; n];
        let mut sum = 0.0;
        let mut stack: Vec<(usize, bool)> = roots.iter().map(|&r| (r, false)).collect();
        while let Some((ci, done)) = stack.pop() {
            if done {
                state[ci] = 2;
                continue;
            }
            match state[ci] {
                2 => continue,
                1 => return f64::INFINITY,
                _ => {}
            }
            let ni = pick[ci];
            if ni == usize::MAX {
                return f64::INFINITY;
            }
            state[ci] = 1;
            sum += self.own[ci][ni];
            stack.push((ci, true));
            for &k in &self.kids[ci][ni] {
                if state[k] == 1 {
                    return f64::INFINITY;
                }
                if state[k] == 0 {
                    stack.push((k, false));
                }
            }
        }
        sum
    }

    fn reachable(&self, roots: &[usize], pick: &[usize]) -> Vec<usize> {
        let mut seen = FixedBitSet::with_capacity(self.classes.len());
        let mut out = Vec::new();
        let mut stack = roots.to_vec();
        while let Some(ci) = stack.pop() {
            if seen.put(ci) || pick[ci] == usize::MAX {
                continue;
            }
            out.push(ci);
            for &k in &self.kids[ci][pick[ci]] {
                stack.push(k);
            }
        }
        out.sort_unstable();
        out
    }

    /// Sibling groups: every group the sibling rule recorded, and every family of two or
    /// more classes that each hold a view (a slice or an output) of one common class.
    /// The second kind finds merges that other rewrites reached: with casts moved
    /// through the slices of a merged GEMM, the low-precision Q, K and V classes each
    /// hold a slice of the merged GEMM that writes the low type, which no rule recorded.
    fn groups(&self) -> Vec<Vec<(usize, usize)>> {
        let mut out: Vec<Vec<(usize, usize)>> = self.recorded_groups();
        let mut families: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
        for (ci, &c) in self.classes.iter().enumerate() {
            for (ni, n) in self.eg[c].nodes.iter().enumerate() {
                let Some(src) = view_source(n) else { continue };
                let f = families.entry(self.index[&self.eg.find(src)]).or_default();
                if f.last().is_none_or(|(last, _)| *last != ci) {
                    f.push((ci, ni));
                }
            }
        }
        for (src, f) in families {
            if f.len() >= 2 && f.iter().all(|(ci, _)| *ci != src) && !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }

    fn recorded_groups(&self) -> Vec<Vec<(usize, usize)>> {
        self.eg
            .analysis
            .groups
            .iter()
            .filter_map(|g| {
                g.iter()
                    .map(|(c, term)| {
                        let ci = *self.index.get(&self.eg.find(*c))?;
                        let canon = term.clone().map_children(|x| self.eg.find(x));
                        let ni = self.eg[self.classes[ci]]
                            .nodes
                            .iter()
                            .position(|n| *n == canon)?;
                        Some((ci, ni))
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .collect()
    }

    /// The second half of a group move: each reader of a member (a class with a node
    /// that reads one) switched to that node where the total `t` drops, in turn. A
    /// merge pays only once its members' readers use it: a SwiGLU reading the gate and
    /// the up projection replaces the gate's own GEMM with a silu epilogue and the
    /// product, and a cast of V's slice replaces V's own low-precision GEMM. Returns
    /// the moves made (class, its previous node), for undoing.
    fn follow_readers(
        &self,
        roots: &[usize],
        pick: &mut [usize],
        group: &[(usize, usize)],
        t: &mut f64,
    ) -> Vec<(usize, usize)> {
        let members: Vec<usize> = group.iter().map(|(ci, _)| *ci).collect();
        let live = FixedBitSet::from_iter(self.reachable(roots, pick));
        let mut moved = Vec::new();
        for &m in &members {
            for &(ci, ni) in &self.parents[m] {
                let skip = members.contains(&ci) || !live.contains(ci) || pick[ci] == ni;
                if skip || !self.own[ci][ni].is_finite() {
                    continue;
                }
                let cur = pick[ci];
                pick[ci] = ni;
                let next = self.total(roots, pick);
                if next < *t * (1.0 - 1e-9) {
                    *t = next;
                    moved.push((ci, cur));
                } else {
                    pick[ci] = cur;
                }
            }
        }
        moved
    }

    /// Improves `pick` in place; false when `deadline` passed first.
    fn refine(&self, roots: &[usize], pick: &mut [usize], deadline: Option<Instant>) -> bool {
        let mut best = self.total(roots, pick);
        let groups = self.groups();
        for _ in 0..REFINE_PASSES {
            let mut improved = false;
            let live = FixedBitSet::from_iter(self.reachable(roots, pick));
            for g in &groups {
                if !g.iter().any(|(ci, _)| live.contains(*ci)) {
                    continue;
                }
                if past(deadline) {
                    return false;
                }
                let saved: Vec<usize> = g.iter().map(|(ci, _)| pick[*ci]).collect();
                for (ci, ni) in g {
                    pick[*ci] = *ni;
                }
                let mut t = self.total(roots, pick);
                let moved = self.follow_readers(roots, pick, g, &mut t);
                if t < best * (1.0 - 1e-9) {
                    best = t;
                    improved = true;
                } else {
                    for ((ci, _), s) in g.iter().zip(saved) {
                        pick[*ci] = s;
                    }
                    for (ci, s) in moved.into_iter().rev() {
                        pick[ci] = s;
                    }
                }
            }
            for ci in self.reachable(roots, pick) {
                let cur = pick[ci];
                for ni in 0..self.own[ci].len() {
                    if ni == cur || !self.own[ci][ni].is_finite() {
                        continue;
                    }
                    if past(deadline) {
                        return false;
                    }
                    pick[ci] = ni;
                    let t = self.total(roots, pick);
                    if t < best * (1.0 - 1e-9) {
                        best = t;
                        improved = true;
                        break;
                    }
                    pick[ci] = cur;
                }
            }
            if !improved {
                break;
            }
        }
        true
    }
}

/// The class a view node reads: a slice's data input, an output's node.
fn view_source(n: &Term) -> Option<Id> {
    match n {
        Term::Op(k, ch) if k.0 == Op::Shape(ShapeOp::Slice) => ch.get(1).copied(),
        Term::Out([_, node]) => Some(*node),
        Term::Op(..) | Term::Leaf(_) => None,
    }
}

/// The classes a node needs: an op's attribute leaf and inputs, an output's node.
fn node_children(n: &Term) -> &[Id] {
    match n {
        Term::Op(_, ch) => ch,
        Term::Out(ch) => ch,
        Term::Leaf(_) => &[],
    }
}
