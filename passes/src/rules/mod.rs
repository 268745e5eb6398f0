//! Rule tables, one file per topic: `algebra` (identities, cancellations, folding into
//! weights), `fusion` (epilogues, normalizations, GELU, attention, sibling GEMMs),
//! `layout` (padding GEMM dims to the tile) and `precision` (low-precision math with
//! fp32 accumulation, cast cancellation). Every rule is directional and never makes its
//! match worse; its left side is an egg pattern, its right side either a pattern or a
//! small function that builds the replacement and returns `None` when a side condition
//! fails. Side conditions are named helpers below (`is_const`, `scalar_of`, ...).

pub mod algebra;
pub mod fusion;
pub mod layout;
mod mask;
mod packed_rows;
pub mod precision;
pub mod quantized;
pub mod rotary;

use crate::analysis::{attrs_of, is_absent, Egraph, Facts};
use crate::lang::{Leaf, OpKey, Term};
use egg::{Applier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};
use gopt_ir::{Attrs, Const, DType, Op};

/// One rewrite rule.
pub type Rule = Rewrite<Term, Facts>;

/// Builds the replacement for one match, or `None` when a side condition fails.
pub type Build = fn(&mut Egraph, Id, &Subst) -> Option<Id>;

/// An applier made of a [`Build`] function: adds what it builds and merges it with the
/// matched class, unless inference rejects it.
pub struct FnApplier {
    build: Build,
    vars: Vec<Var>,
}

impl Applier<Term, Facts> for FnApplier {
    fn apply_one(
        &self,
        eg: &mut Egraph,
        eclass: Id,
        subst: &Subst,
        ast: Option<&PatternAst<Term>>,
        rule: Symbol,
    ) -> Vec<Id> {
        // Builders make fresh constants (padded or concatenated weights) that hash-consing
        // cannot share, so each rule builds at most once per match (class and bindings).
        let bound: Vec<Id> = self.vars.iter().map(|v| eg.find(subst[*v])).collect();
        let key = (rule, eg.find(eclass), bound.clone());
        if eg.analysis.applied.contains(&key) {
            return vec![];
        }
        let Some(new) = (self.build)(eg, eclass, subst) else {
            return vec![];
        };
        eg.analysis.applied.insert(key);
        if eg[new].data.error.is_some() || !same_types(eg, eclass, new) {
            return vec![];
        }
        // egg passes the matched pattern only when it records explanations: then the
        // union starts at the matched term and carries the rule's name.
        let merged = match ast {
            Some(ast) => union_explained(eg, ast, subst, new, rule),
            None => eg.union(eclass, new),
        };
        if merged {
            let root = eg.find(eclass);
            let bound: Vec<Id> = bound.iter().map(|&b| eg.find(b)).collect();
            eg.analysis.applied.insert((rule, root, bound));
            vec![eclass]
        } else {
            vec![]
        }
    }
}

/// Merges the instantiation of the matched pattern `ast` with `new`, justified by
/// `rule` (the explanation's step from the term the rule matched to what it built).
fn union_explained(
    eg: &mut Egraph,
    ast: &PatternAst<Term>,
    subst: &Subst,
    new: Id,
    rule: Symbol,
) -> bool {
    let built = Var::from_u32(u32::MAX);
    let mut s = subst.clone();
    s.insert(built, new);
    let to: PatternAst<Term> = vec![egg::ENodeOrVar::Var(built)].into();
    eg.union_instantiations(ast, &to, &s, rule).1
}

/// A rule whose right side is a function.
pub fn rule(name: &str, lhs: &str, build: Build) -> Rule {
    let pat: Pattern<Term> = lhs
        .parse()
        .unwrap_or_else(|e| panic!("rule {name}: bad pattern {lhs}: {e}"));
    let vars = egg::Searcher::<Term, Facts>::vars(&pat);
    Rewrite::new(name, pat, FnApplier { build, vars })
        .unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

/// A rule whose both sides are patterns (used only where the right side is a variable
/// of the left, so types cannot change).
pub fn pattern_rule(name: &str, lhs: &str, rhs: &str) -> Rule {
    let l: Pattern<Term> = lhs.parse().unwrap_or_else(|e| panic!("rule {name}: {e}"));
    let r: Pattern<Term> = rhs.parse().unwrap_or_else(|e| panic!("rule {name}: {e}"));
    Rewrite::new(name, l, r).unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

/// Both classes have the same single type (a rewrite never changes a value's type).
fn same_types(eg: &Egraph, a: Id, b: Id) -> bool {
    let (x, y) = (&eg[a].data, &eg[b].data);
    x.tys.len() == y.tys.len()
        && x.tys.iter().zip(&y.tys).all(|(p, q)| {
            p.dtype == q.dtype
                && p.shape.len() == q.shape.len()
                && p.shape
                    .iter()
                    .zip(&q.shape)
                    .all(|(m, n)| m == n || m.known().is_none() || n.known().is_none())
        })
}

/// The class bound to `?name`.
pub fn var(s: &Subst, name: &str) -> Id {
    let v: Var = name
        .parse()
        .unwrap_or_else(|e| panic!("bad var {name}: {e:?}"));
    s[v]
}

/// Adds `op` with attributes and inputs (`None` = omitted optional input).
pub fn add_op(eg: &mut Egraph, op: Op, attrs: Attrs, inputs: &[Option<Id>]) -> Id {
    let a = eg.analysis.intern_attrs(attrs);
    let mut ch = vec![eg.add(Term::Leaf(a))];
    for i in inputs {
        ch.push(match i {
            Some(id) => *id,
            None => eg.add(Term::Leaf(Leaf::Absent)),
        });
    }
    eg.add(Term::Op(OpKey::one(op), ch))
}

/// Adds a constant leaf.
pub fn add_const(eg: &mut Egraph, t: impl Into<Const>) -> Id {
    let leaf = eg.analysis.intern_const(t.into());
    eg.add(Term::Leaf(leaf))
}

/// The value of a constant class (a shared handle; `.tensor()` decodes it).
pub fn konst(eg: &Egraph, id: Id) -> Option<Const> {
    eg[id].data.konst.clone()
}

/// True for a constant class.
pub fn is_const(eg: &Egraph, id: Id) -> bool {
    eg[id].data.konst.is_some()
}

/// The value of a one-element constant, as f64.
pub fn scalar_of(eg: &Egraph, id: Id) -> Option<f64> {
    let k = konst(eg, id)?;
    (k.len() == 1 && k.dtype().is_float()).then(|| k.tensor().to_f64_vec()[0])
}

/// The concrete shape of a class's value.
pub fn shape(eg: &Egraph, id: Id) -> Option<Vec<usize>> {
    eg[id].data.shape()
}

/// The dtype of a class's value.
pub fn dtype(eg: &Egraph, id: Id) -> Option<DType> {
    eg[id].data.dtype()
}

/// The attributes bound to `?name` (an attribute leaf).
pub fn attrs(eg: &Egraph, s: &Subst, name: &str) -> Option<Attrs> {
    attrs_of(eg, var(s, name)).cloned()
}

/// True when the class bound to `?name` is an omitted input.
pub fn absent(eg: &Egraph, s: &Subst, name: &str) -> bool {
    is_absent(eg, var(s, name))
}

/// Concatenates constants of one float dtype along `axis`: a lazy view (weights are
/// large: nothing is copied until the plan's weights are written).
pub fn concat(ts: &[Const], axis: usize) -> Option<Const> {
    if !ts.first()?.dtype().is_float() {
        return None;
    }
    Const::concat(ts, axis).ok()
}

/// The absent-input class.
pub fn none(eg: &mut Egraph) -> Id {
    eg.add(Term::Leaf(Leaf::Absent))
}

/// Every rule of the enabled topics.
pub fn table(cfg: &crate::Config) -> Vec<Rule> {
    let mut r = algebra::rules();
    if cfg.enabled(crate::Pass::Fusion) {
        r.extend(fusion::rules());
        r.extend(rotary::rules());
        r.extend(mask::rules());
        r.extend(quantized::rules());
    }
    if cfg.enabled(crate::Pass::Layout) {
        r.extend(layout::rules());
    }
    if let Some(low) = cfg.low_precision() {
        r.extend(precision::rules(low));
        r.extend(quantized::precision(low));
    }
    r
}

/// The rule called `name` from any table (precision rules for bf16), for tests and tools.
pub fn by_name(name: &str) -> Option<Rule> {
    let cfg = crate::Config {
        precision: crate::Precision::Bf16,
        ..crate::Config::default()
    };
    table(&cfg).into_iter().find(|r| r.name.as_str() == name)
}

/// Names of every rule of every table.
pub fn names() -> Vec<String> {
    let cfg = crate::Config {
        precision: crate::Precision::Bf16,
        ..crate::Config::default()
    };
    table(&cfg).iter().map(|r| r.name.to_string()).collect()
}
