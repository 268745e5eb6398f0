//! The e-graph language. It mirrors the IR's op set by construction: an op e-node is
//! `(Name attrs input...)` for any `ir::Op` (fused ops included), so adding an op to the
//! IR adds it here with no edit. Attributes are an interned leaf in the first child slot,
//! so rules can bind them to a pattern variable and read them in side conditions
//! (`a0` is the empty set, which attribute-free ops always carry). Leaves are graph
//! inputs, constants (interned by the analysis), attribute sets, small integers (output
//! indices) and absent optional inputs. A node with several outputs is one e-class; each
//! output is `(out #k node)`.

use egg::{define_language, Id};
use gopt_ir::Op;
use std::fmt;
use std::str::FromStr;

/// An IR op as an e-node operator, with how many outputs the node has (ops such as
/// LayerNormalization or Dropout have optional outputs). Printed and parsed as the op's
/// name, with `:n` for n ≠ 1 outputs (`Split:3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpKey(pub Op, pub u32);

impl OpKey {
    /// A single-output op.
    pub fn one(op: Op) -> OpKey {
        OpKey(op, 1)
    }
}

impl fmt::Display for OpKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            1 => f.write_str(self.0.name()),
            n => write!(f, "{}:{n}", self.0.name()),
        }
    }
}

impl FromStr for OpKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, outs) = match s.split_once(':') {
            Some((n, k)) => (n, k.parse::<u32>().map_err(|e| format!("{s}: {e}"))?),
            None => (s, 1),
        };
        Op::from_name(name)
            .map(|o| OpKey(o, outs))
            .ok_or_else(|| format!("unknown op {s}"))
    }
}

/// A leaf of the e-graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Leaf {
    /// Graph input number `i` (`in3`).
    Input(u32),
    /// Constant `i` of the analysis's constant table (`c7`).
    Const(u32),
    /// Attribute set `i` of the analysis's attribute table (`a0` is empty).
    Attrs(u32),
    /// A small integer, such as an output index (`#1`).
    Int(i64),
    /// An omitted optional input (`none`).
    Absent,
}

impl fmt::Display for Leaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leaf::Input(i) => write!(f, "in{i}"),
            Leaf::Const(i) => write!(f, "c{i}"),
            Leaf::Attrs(i) => write!(f, "a{i}"),
            Leaf::Int(i) => write!(f, "#{i}"),
            Leaf::Absent => f.write_str("none"),
        }
    }
}

impl FromStr for Leaf {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let num = |rest: &str| rest.parse::<u32>().map_err(|e| format!("{s}: {e}"));
        if s == "none" {
            Ok(Leaf::Absent)
        } else if let Some(r) = s.strip_prefix('#') {
            r.parse().map(Leaf::Int).map_err(|e| format!("{s}: {e}"))
        } else if let Some(r) = s.strip_prefix("in") {
            num(r).map(Leaf::Input)
        } else if let Some(r) = s.strip_prefix('c') {
            num(r).map(Leaf::Const)
        } else if let Some(r) = s.strip_prefix('a') {
            num(r).map(Leaf::Attrs)
        } else {
            Err(format!("not a leaf: {s}"))
        }
    }
}

// The macro cannot carry per-variant docs: `Out` is `(out #k node)`, `Leaf` a leaf,
// `Op` an op with its attribute leaf first and then its inputs.
#[allow(missing_docs)]
mod term {
    use super::*;
    define_language! {
        /// An e-node: a leaf, an output projection, or an op with its attributes and inputs.
        pub enum Term {
            "out" = Out([Id; 2]),
            Leaf(Leaf),
            Op(OpKey, Vec<Id>),
        }
    }
}
pub use term::Term;

impl Term {
    /// The op, for op nodes.
    pub fn op(&self) -> Option<Op> {
        match self {
            Term::Op(k, _) => Some(k.0),
            Term::Out(_) | Term::Leaf(_) => None,
        }
    }

    /// The input classes of an op node (its children after the attribute leaf).
    pub fn op_inputs(&self) -> &[Id] {
        match self {
            Term::Op(_, ch) => ch.get(1..).unwrap_or(&[]),
            Term::Out(_) | Term::Leaf(_) => &[],
        }
    }

    /// The attribute-leaf class of an op node.
    pub fn attrs_class(&self) -> Option<Id> {
        match self {
            Term::Op(_, ch) => ch.first().copied(),
            Term::Out(_) | Term::Leaf(_) => None,
        }
    }
}
