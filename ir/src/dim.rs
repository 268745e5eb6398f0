//! Symbolic dimensions. A dim is a known size, a named symbol (from ONNX `dim_param`,
//! e.g. `batch`), or a small expression over them (`seq+1`, `batch*seq`), so shape
//! inference can carry `Reshape`/`Concat` arithmetic until buckets bind the symbols.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// One dimension of a value's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// A known extent.
    Known(u64),
    /// A named symbol, bound later (at specialization) or at run time.
    Sym(Arc<str>),
    /// Sum of two dims.
    Add(Box<Dim>, Box<Dim>),
    /// Product of two dims.
    Mul(Box<Dim>, Box<Dim>),
    /// Floor division of a dim by another.
    Div(Box<Dim>, Box<Dim>),
}

/// Bindings from symbol names to sizes.
pub type Bindings = HashMap<String, u64>;

impl Dim {
    /// A named symbol.
    pub fn sym(name: &str) -> Dim {
        Dim::Sym(Arc::from(name))
    }

    /// The dim an exporter names `text` (an ONNX `dim_param`): an arithmetic expression
    /// over names and whole numbers with `+`, `*`, `/` (floor) and parentheses, as
    /// exporters write a total length (`"past_sequence_length + sequence_length"`),
    /// becomes that expression, so binding its names binds it; any other text (a plain
    /// name, `batch-size`, a `-`) is one symbol of that name.
    pub fn parse(text: &str) -> Dim {
        let has_op = text.contains(['+', '*', '/', '(']);
        let tokens = has_op.then(|| expr::tokens(text)).flatten();
        match tokens.and_then(|t| expr::Parser { t, at: 0 }.whole()) {
            Some(d) => d,
            None => Dim::sym(text),
        }
    }

    /// The size when it is known.
    pub fn known(&self) -> Option<u64> {
        match self {
            Dim::Known(n) => Some(*n),
            _ => None,
        }
    }

    /// `self + other`, folded when both are known (saturating at
    /// [`OVERFLOW`](crate::budget::OVERFLOW), which type checks report).
    pub fn add(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) => Dim::Known(a.saturating_add(*b)),
            (Dim::Known(0), d) | (d, Dim::Known(0)) => d.clone(),
            (a, b) => Dim::Add(Box::new(a.clone()), Box::new(b.clone())),
        }
    }

    /// `self * other`, folded when both are known (saturating, as `add`).
    pub fn mul(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Known(0), _) | (_, Dim::Known(0)) => Dim::Known(0),
            (Dim::Known(a), Dim::Known(b)) => Dim::Known(a.saturating_mul(*b)),
            (Dim::Known(1), d) | (d, Dim::Known(1)) => d.clone(),
            (a, b) => Dim::Mul(Box::new(a.clone()), Box::new(b.clone())),
        }
    }

    /// `self / other` (floor), folded when both are known or when `other` is a factor of
    /// a product. An overflowed dividend stays overflowed (its true value is unknown).
    pub fn div(&self, other: &Dim) -> Dim {
        const OVERFLOW: u64 = crate::budget::OVERFLOW;
        match (self, other) {
            (Dim::Known(OVERFLOW), _) | (_, Dim::Known(OVERFLOW)) => Dim::Known(OVERFLOW),
            (Dim::Known(a), Dim::Known(b)) if *b != 0 => Dim::Known(a / b),
            (d, Dim::Known(1)) => d.clone(),
            (a, b) if a == b => Dim::Known(1),
            (Dim::Mul(x, y), b) if **y == *b => (**x).clone(),
            (Dim::Mul(x, y), b) if **x == *b => (**y).clone(),
            (a, b) => Dim::Div(Box::new(a.clone()), Box::new(b.clone())),
        }
    }

    /// Product of dims (1 for none).
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
        dims.into_iter().fold(Dim::Known(1), |acc, d| acc.mul(d))
    }

    /// Replaces bound symbols by their sizes and folds what becomes known.
    pub fn bind(&self, b: &Bindings) -> Dim {
        match self {
            Dim::Known(_) => self.clone(),
            Dim::Sym(s) => b
                .get(&**s)
                .map(|&n| Dim::Known(n))
                .unwrap_or_else(|| self.clone()),
            Dim::Add(x, y) => x.bind(b).add(&y.bind(b)),
            Dim::Mul(x, y) => x.bind(b).mul(&y.bind(b)),
            Dim::Div(x, y) => x.bind(b).div(&y.bind(b)),
        }
    }

    /// The symbols this dim mentions.
    pub fn symbols(&self, out: &mut Vec<Arc<str>>) {
        match self {
            Dim::Known(_) => {}
            Dim::Sym(s) => {
                if !out.contains(s) {
                    out.push(s.clone())
                }
            }
            Dim::Add(x, y) | Dim::Mul(x, y) | Dim::Div(x, y) => {
                x.symbols(out);
                y.symbols(out);
            }
        }
    }
}

impl From<u64> for Dim {
    fn from(n: u64) -> Dim {
        Dim::Known(n)
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Known(n as u64)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
            Dim::Add(a, b) => write!(f, "({a}+{b})"),
            Dim::Mul(a, b) => write!(f, "({a}*{b})"),
            Dim::Div(a, b) => write!(f, "({a}/{b})"),
        }
    }
}

/// A shape whose dims may be symbolic.
pub type Shape = Vec<Dim>;

/// Converts a concrete shape to a symbolic one.
pub fn shape_of(dims: &[usize]) -> Shape {
    dims.iter().map(|&d| Dim::Known(d as u64)).collect()
}

/// The concrete shape, when every dim is known.
pub fn concrete(shape: &[Dim]) -> Option<Vec<usize>> {
    shape
        .iter()
        .map(|d| d.known().map(|n| n as usize))
        .collect()
}

/// Formats a shape as `[batch,3,224,224]`.
pub fn fmt_shape(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// The small expression grammar of [`Dim::parse`]: `sum := product ('+' product)*`,
/// `product := atom (('*' | '/') atom)*`, `atom := name | number | '(' sum ')'`.
mod expr {
    use super::Dim;

    #[derive(Clone, Debug, PartialEq)]
    pub(super) enum Tok {
        Name(String),
        Num(u64),
        Op(char),
    }

    /// The tokens of `text`, or `None` where a character is outside the grammar.
    pub(super) fn tokens(text: &str) -> Option<Vec<Tok>> {
        let mut out = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                chars.next();
            } else if "+*/()".contains(c) {
                out.push(Tok::Op(c));
                chars.next();
            } else if c.is_ascii_alphanumeric() || c == '_' {
                let mut word = String::new();
                while let Some(&w) = chars.peek() {
                    if !(w.is_ascii_alphanumeric() || w == '_') {
                        break;
                    }
                    word.push(w);
                    chars.next();
                }
                if word.starts_with(|f: char| f.is_ascii_digit()) {
                    out.push(Tok::Num(word.parse().ok()?));
                } else {
                    out.push(Tok::Name(word));
                }
            } else {
                return None;
            }
        }
        Some(out)
    }

    pub(super) struct Parser {
        pub t: Vec<Tok>,
        pub at: usize,
    }

    impl Parser {
        /// The whole token list as one expression, or `None`.
        pub fn whole(mut self) -> Option<Dim> {
            let d = self.sum()?;
            (self.at == self.t.len()).then_some(d)
        }

        fn eat(&mut self, op: char) -> bool {
            let hit = self.t.get(self.at) == Some(&Tok::Op(op));
            self.at += usize::from(hit);
            hit
        }

        fn sum(&mut self) -> Option<Dim> {
            let mut d = self.product()?;
            while self.eat('+') {
                d = d.add(&self.product()?);
            }
            Some(d)
        }

        fn product(&mut self) -> Option<Dim> {
            let mut d = self.atom()?;
            loop {
                if self.eat('*') {
                    d = d.mul(&self.atom()?);
                } else if self.eat('/') {
                    d = d.div(&self.atom()?);
                } else {
                    return Some(d);
                }
            }
        }

        fn atom(&mut self) -> Option<Dim> {
            let tok = self.t.get(self.at)?.clone();
            self.at += 1;
            match tok {
                Tok::Name(n) => Some(Dim::sym(&n)),
                Tok::Num(n) => Some(Dim::Known(n)),
                Tok::Op('(') => {
                    let d = self.sum()?;
                    self.eat(')').then_some(d)
                }
                Tok::Op(_) => None,
            }
        }
    }
}
