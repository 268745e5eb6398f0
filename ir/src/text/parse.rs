//! The parser: reads the text the printer writes (and hand-written test graphs) back into
//! a `Graph`. Values are `%N` local to each graph; names and types follow the number.

use crate::attr::{Attr, Attrs};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, TensorType, ValueId};
use crate::ops::Op;
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};

/// Parses one graph in the text format.
pub fn parse(src: &str) -> Result<Graph> {
    let toks = lex(src)?;
    let mut p = Parser { toks, pos: 0 };
    let g = p.graph()?;
    if p.pos < p.toks.len() {
        return Err(p.err("trailing text after the graph"));
    }
    Ok(g)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Var(usize),
    Str(String),
    Num(String),
    Punct(char),
    Arrow,
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let (mut i, mut line) = (0, 1);
    let err = |line: usize, msg: String| IrError::Parse { line, msg };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '%' => {
                let start = i + 1;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                let s: String = chars[start..i].iter().collect();
                let n = s
                    .parse()
                    .map_err(|_| err(line, format!("bad value reference `%{s}`")))?;
                out.push((Tok::Var(n), line));
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(&c) = chars.get(i) else {
                        return Err(err(line, "unterminated string".into()));
                    };
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' => {
                            let Some(&e) = chars.get(i) else {
                                return Err(err(line, "unterminated escape".into()));
                            };
                            i += 1;
                            match e {
                                'n' => s.push('\n'),
                                't' => s.push('\t'),
                                'r' => s.push('\r'),
                                '0' => s.push('\0'),
                                '\\' | '"' | '\'' => s.push(e),
                                'u' => {
                                    // `\u{hex}`: the brace must open right after the `u`.
                                    let close = (chars.get(i) == Some(&'{'))
                                        .then(|| chars[i..].iter().position(|&c| c == '}'))
                                        .flatten()
                                        .map(|p| i + p);
                                    let Some(close) = close else {
                                        return Err(err(line, "bad \\u escape".into()));
                                    };
                                    let hex: String = chars[i + 1..close].iter().collect();
                                    let ch =
                                        u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                                    s.push(ch.ok_or_else(|| {
                                        err(line, format!("bad \\u{{{hex}}} escape"))
                                    })?);
                                    i = close + 1;
                                }
                                _ => return Err(err(line, format!("unknown escape `\\{e}`"))),
                            }
                        }
                        c => s.push(c),
                    }
                }
                out.push((Tok::Str(s), line));
            }
            '-' if chars.get(i + 1) == Some(&'>') => {
                out.push((Tok::Arrow, line));
                i += 2;
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' => {
                let start = i;
                i += 1;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric()
                        || chars[i] == '.'
                        || ((chars[i] == '-' || chars[i] == '+')
                            && matches!(chars[i - 1], 'e' | 'E')))
                {
                    i += 1;
                }
                out.push((Tok::Num(chars[start..i].iter().collect()), line));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
                {
                    i += 1;
                }
                out.push((Tok::Word(chars[start..i].iter().collect()), line));
            }
            '(' | ')' | '[' | ']' | '{' | '}' | ',' | ':' | '=' | '<' | '>' | '*' | '/' => {
                out.push((Tok::Punct(c), line));
                i += 1;
            }
            c => return Err(err(line, format!("unexpected character `{c}`"))),
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

/// Per-graph state: `%N` → value, and which values were declared.
struct Scope {
    g: Graph,
    vars: HashMap<usize, ValueId>,
    declared: HashSet<ValueId>,
}

impl Scope {
    fn var(&mut self, n: usize) -> ValueId {
        if let Some(&v) = self.vars.get(&n) {
            return v;
        }
        let v = self.g.add_value("", None);
        self.vars.insert(n, v);
        v
    }
}

impl Parser {
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map(|t| t.1)
            .unwrap_or(1)
    }

    fn err(&self, msg: &str) -> IrError {
        let found = match self.toks.get(self.pos) {
            Some((t, _)) => format!("{t:?}"),
            None => "end of input".into(),
        };
        IrError::Parse {
            line: self.line(),
            msg: format!("{msg} (found {found})"),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(&format!("expected `{c}`")))
        }
    }

    fn word(&mut self) -> Result<String> {
        match self.next() {
            Some(Tok::Word(w)) => Ok(w),
            _ => {
                self.pos -= 1;
                Err(self.err("expected a word"))
            }
        }
    }

    fn keyword(&mut self, k: &str) -> Result<()> {
        match self.peek() {
            Some(Tok::Word(w)) if w == k => {
                self.pos += 1;
                Ok(())
            }
            _ => Err(self.err(&format!("expected `{k}`"))),
        }
    }

    fn string(&mut self) -> Result<String> {
        match self.next() {
            Some(Tok::Str(s)) => Ok(s),
            _ => {
                self.pos -= 1;
                Err(self.err("expected a quoted string"))
            }
        }
    }

    fn var(&mut self) -> Result<usize> {
        match self.next() {
            Some(Tok::Var(n)) => Ok(n),
            _ => {
                self.pos -= 1;
                Err(self.err("expected a value `%N`"))
            }
        }
    }

    fn num(&mut self) -> Result<String> {
        match self.next() {
            Some(Tok::Num(s)) => Ok(s),
            Some(Tok::Word(w)) if w == "inf" || w == "NaN" => Ok(w),
            _ => {
                self.pos -= 1;
                Err(self.err("expected a number"))
            }
        }
    }

    fn graph(&mut self) -> Result<Graph> {
        self.keyword("graph")?;
        let name = self.string()?;
        let mut s = Scope {
            g: Graph::new(&name),
            vars: HashMap::new(),
            declared: HashSet::new(),
        };
        self.expect('(')?;
        while !self.eat(')') {
            let v = self.decl(&mut s)?;
            s.g.inputs.push(v);
            self.eat(',');
        }
        if self.next() != Some(Tok::Arrow) {
            self.pos -= 1;
            return Err(self.err("expected `->`"));
        }
        self.expect('(')?;
        let mut outs = Vec::new();
        while !self.eat(')') {
            outs.push(self.var()?);
            self.eat(',');
        }
        if matches!(self.peek(), Some(Tok::Word(w)) if w == "captures") {
            self.pos += 1;
            self.expect('(')?;
            while !self.eat(')') {
                let v = self.decl(&mut s)?;
                s.g.captures.push(v);
                self.eat(',');
            }
        }
        self.expect('{')?;
        while !self.eat('}') {
            self.stmt(&mut s)?;
        }
        s.g.outputs = outs.into_iter().map(|n| s.var(n)).collect();
        let undeclared: Vec<_> = s
            .vars
            .iter()
            .filter(|(_, v)| !s.declared.contains(v))
            .map(|(n, _)| *n)
            .collect();
        if let Some(n) = undeclared.first() {
            return Err(IrError::Parse {
                line: self.line(),
                msg: format!("value %{n} is used but never defined"),
            });
        }
        Ok(s.g)
    }

    /// `%N "name"[: type]`
    fn decl(&mut self, s: &mut Scope) -> Result<ValueId> {
        let n = self.var()?;
        let name = self.string()?;
        let ty = if self.eat(':') {
            Some(self.ty()?)
        } else {
            None
        };
        let v = s.var(n);
        if !s.declared.insert(v) {
            return Err(self.err(&format!("value %{n} is defined twice")));
        }
        let val = &mut s.g.values[v.index()];
        val.name = name;
        val.ty = ty;
        Ok(v)
    }

    fn dtype(&mut self) -> Result<DType> {
        let w = self.word()?;
        w.parse().map_err(|e: String| IrError::Parse {
            line: self.line(),
            msg: e,
        })
    }

    fn ty(&mut self) -> Result<TensorType> {
        let dtype = self.dtype()?;
        self.expect('[')?;
        let mut shape = Vec::new();
        while !self.eat(']') {
            shape.push(self.dim()?);
            self.eat(',');
        }
        Ok(TensorType::new(dtype, shape))
    }

    fn dim(&mut self) -> Result<Dim> {
        match self.next() {
            Some(Tok::Num(s)) => s.parse().map(Dim::Known).map_err(|_| self.err("bad dim")),
            Some(Tok::Word(w)) => Ok(Dim::sym(&w)),
            Some(Tok::Punct('(')) => {
                let a = Box::new(self.dim()?);
                let d = match self.next() {
                    Some(Tok::Punct('*')) => Dim::Mul(a, Box::new(self.dim()?)),
                    Some(Tok::Punct('/')) => Dim::Div(a, Box::new(self.dim()?)),
                    // `+3` and `+seq` lex as one token; a lone `+` precedes a nested dim.
                    Some(Tok::Num(s)) if s == "+" => Dim::Add(a, Box::new(self.dim()?)),
                    Some(Tok::Num(s)) if s.starts_with('+') => {
                        let rest = &s[1..];
                        let b = rest
                            .parse()
                            .map(Dim::Known)
                            .unwrap_or_else(|_| Dim::sym(rest));
                        Dim::Add(a, Box::new(b))
                    }
                    _ => {
                        self.pos -= 1;
                        return Err(self.err("expected `+`, `*` or `/` in a dim expression"));
                    }
                };
                self.expect(')')?;
                Ok(d)
            }
            _ => {
                self.pos -= 1;
                Err(self.err("expected a dim"))
            }
        }
    }

    fn stmt(&mut self, s: &mut Scope) -> Result<()> {
        let mut outs = vec![self.decl(s)?];
        while self.eat(',') {
            outs.push(self.decl(s)?);
        }
        self.expect('=')?;
        let opname = self.word()?;
        if opname == "const" {
            let [v] = outs[..] else {
                return Err(self.err("a constant defines exactly one value"));
            };
            let ty = s.g.values[v.index()]
                .ty
                .clone()
                .ok_or_else(|| self.err("a constant needs a type"))?;
            let shape = crate::dim::concrete(&ty.shape)
                .ok_or_else(|| self.err("a constant needs a concrete shape"))?;
            let t = self.data(ty.dtype, &shape)?;
            s.g.constants.insert(v, t.into());
            return Ok(());
        }
        let op =
            Op::from_name(&opname).ok_or_else(|| self.err(&format!("unknown op `{opname}`")))?;
        let name = self.string()?;
        self.expect('(')?;
        let mut inputs = Vec::new();
        while !self.eat(')') {
            if matches!(self.peek(), Some(Tok::Word(w)) if w == "_") {
                self.pos += 1;
                inputs.push(None);
            } else {
                let n = self.var()?;
                inputs.push(Some(s.var(n)));
            }
            self.eat(',');
        }
        let mut attrs = Attrs::default();
        if self.eat('{') {
            while !self.eat('}') {
                let k = self.word()?;
                self.expect('=')?;
                let v = self.attr()?;
                attrs.set(&k, v);
                self.eat(',');
            }
        }
        s.g.nodes.push(Node {
            name,
            op,
            attrs,
            inputs,
            outputs: outs,
        });
        Ok(())
    }

    fn attr(&mut self) -> Result<Attr> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                number_attr(&n).ok_or_else(|| self.err("bad number"))
            }
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok(Attr::Str(s))
            }
            Some(Tok::Word(w)) => match w.as_str() {
                "inf" | "NaN" => {
                    self.pos += 1;
                    Ok(Attr::Float(if w == "inf" {
                        f32::INFINITY
                    } else {
                        f32::NAN
                    }))
                }
                "ints" | "floats" | "strs" => {
                    self.pos += 1;
                    self.expect('[')?;
                    let mut items = Vec::new();
                    while !self.eat(']') {
                        items.push(match w.as_str() {
                            "strs" => self.string()?,
                            _ => self.num()?,
                        });
                        self.eat(',');
                    }
                    let bad = || self.err("bad list element");
                    Ok(match w.as_str() {
                        "ints" => Attr::Ints(
                            items
                                .iter()
                                .map(|s| s.parse().map_err(|_| bad()))
                                .collect::<Result<_>>()?,
                        ),
                        "floats" => Attr::Floats(
                            items
                                .iter()
                                .map(|s| parse_f64(s).map(|v| v as f32).ok_or_else(bad))
                                .collect::<Result<_>>()?,
                        ),
                        _ => Attr::Strs(items),
                    })
                }
                "dtype" => {
                    self.pos += 1;
                    Ok(Attr::DType(self.dtype()?))
                }
                "tensor" => {
                    self.pos += 1;
                    let dtype = self.dtype()?;
                    self.expect('[')?;
                    let mut shape = Vec::new();
                    while !self.eat(']') {
                        shape.push(self.num()?.parse().map_err(|_| self.err("bad dim"))?);
                        self.eat(',');
                    }
                    Ok(Attr::Tensor(self.data(dtype, &shape)?))
                }
                "graph" => Ok(Attr::Graph(Box::new(self.graph()?))),
                _ => Err(self.err("expected an attribute value")),
            },
            _ => Err(self.err("expected an attribute value")),
        }
    }

    fn data(&mut self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        if self.eat('<') {
            return Err(
                self.err("elided constant data cannot be parsed back (print with all data)")
            );
        }
        self.expect('[')?;
        let mut vals = Vec::new();
        while !self.eat(']') {
            let t = self.next();
            let v = match t {
                Some(Tok::Num(s)) | Some(Tok::Word(s)) => match s.as_str() {
                    "true" => Some(1.0),
                    "false" => Some(0.0),
                    s if dtype.is_int() => {
                        // Integers parse exactly (i64 beyond 2^53 must not go through f64).
                        s.parse::<i64>().ok().map(|i| {
                            vals.push(Val::I(i));
                            f64::NAN
                        })
                    }
                    s => parse_f64(s),
                },
                _ => None,
            };
            match v {
                Some(x) if !(dtype.is_int() && x.is_nan()) => vals.push(Val::F(x)),
                Some(_) => {}
                None => {
                    self.pos -= 1;
                    return Err(self.err(&format!("bad {dtype} element")));
                }
            }
            self.eat(',');
        }
        let n: usize = shape.iter().product();
        if vals.len() != n {
            return Err(self.err(&format!(
                "constant of shape {shape:?} needs {n} elements, found {}",
                vals.len()
            )));
        }
        if dtype.is_int() {
            let ints: Vec<i64> = vals
                .iter()
                .map(|v| match v {
                    Val::I(i) => *i,
                    Val::F(f) => *f as i64,
                })
                .collect();
            return Ok(Tensor::I64(crate::tensor::array_from(shape, ints)?).cast(dtype));
        }
        let fs: Vec<f64> = vals
            .iter()
            .map(|v| match v {
                Val::I(i) => *i as f64,
                Val::F(f) => *f,
            })
            .collect();
        Tensor::from_f64s(dtype, shape, &fs)
    }
}

enum Val {
    I(i64),
    F(f64),
}

fn parse_f64(s: &str) -> Option<f64> {
    match s {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        s => s.parse().ok(),
    }
}

fn number_attr(s: &str) -> Option<Attr> {
    if s.contains(['.', 'e', 'E', 'i', 'N']) {
        parse_f64(s).map(|v| Attr::Float(v as f32))
    } else {
        s.parse().ok().map(Attr::Int)
    }
}
