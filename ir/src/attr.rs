//! Node attributes: a small typed map. Importers normalise attributes to the latest ONNX
//! semantics of each op, so the interpreter and passes read one form only.

use crate::dtype::DType;
use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// A signed integer.
    Int(i64),
    /// A float.
    Float(f32),
    /// A string.
    Str(String),
    /// A list of integers.
    Ints(Vec<i64>),
    /// A list of floats.
    Floats(Vec<f32>),
    /// A list of strings.
    Strs(Vec<String>),
    /// A dtype (ONNX's `to`, `dtype`, `output_dtype` attributes).
    DType(DType),
    /// A tensor.
    Tensor(Tensor),
    /// A sub-graph (If branches, Loop and Scan bodies).
    Graph(Box<Graph>),
}

impl Attr {
    fn kind(&self) -> &'static str {
        match self {
            Attr::Int(_) => "int",
            Attr::Float(_) => "float",
            Attr::Str(_) => "string",
            Attr::Ints(_) => "ints",
            Attr::Floats(_) => "floats",
            Attr::Strs(_) => "strings",
            Attr::DType(_) => "dtype",
            Attr::Tensor(_) => "tensor",
            Attr::Graph(_) => "graph",
        }
    }
}

/// The attributes of one node, sorted by name (so printing is stable).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs(pub BTreeMap<String, Attr>);

fn wrong(name: &str, want: &str, got: &Attr) -> IrError {
    IrError::Attr {
        name: name.into(),
        msg: format!("expected {want}, found {}", got.kind()),
    }
}

fn missing(name: &str) -> IrError {
    IrError::Attr {
        name: name.into(),
        msg: "required but missing".into(),
    }
}

impl Attrs {
    /// Sets an attribute.
    pub fn set(&mut self, name: &str, v: Attr) {
        self.0.insert(name.to_string(), v);
    }

    /// Raw access.
    pub fn get(&self, name: &str) -> Option<&Attr> {
        self.0.get(name)
    }

    /// True if the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// An optional integer.
    pub fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Int(v)) => Ok(Some(*v)),
            Some(a) => Err(wrong(name, "int", a)),
        }
    }

    /// An integer with a default.
    pub fn int_or(&self, name: &str, d: i64) -> Result<i64> {
        Ok(self.int(name)?.unwrap_or(d))
    }

    /// A required integer.
    pub fn req_int(&self, name: &str) -> Result<i64> {
        self.int(name)?.ok_or_else(|| missing(name))
    }

    /// An optional float (ints are accepted and converted).
    pub fn float(&self, name: &str) -> Result<Option<f32>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Float(v)) => Ok(Some(*v)),
            Some(Attr::Int(v)) => Ok(Some(*v as f32)),
            Some(a) => Err(wrong(name, "float", a)),
        }
    }

    /// A float with a default.
    pub fn float_or(&self, name: &str, d: f32) -> Result<f32> {
        Ok(self.float(name)?.unwrap_or(d))
    }

    /// An optional string.
    pub fn str(&self, name: &str) -> Result<Option<&str>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Str(v)) => Ok(Some(v)),
            Some(a) => Err(wrong(name, "string", a)),
        }
    }

    /// A string with a default.
    pub fn str_or<'a>(&'a self, name: &str, d: &'a str) -> Result<&'a str> {
        Ok(self.str(name)?.unwrap_or(d))
    }

    /// An optional list of integers.
    pub fn ints(&self, name: &str) -> Result<Option<&[i64]>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v)),
            Some(a) => Err(wrong(name, "ints", a)),
        }
    }

    /// An optional list of floats.
    pub fn floats(&self, name: &str) -> Result<Option<&[f32]>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Floats(v)) => Ok(Some(v)),
            Some(a) => Err(wrong(name, "floats", a)),
        }
    }

    /// An optional list of strings.
    pub fn strs(&self, name: &str) -> Result<Option<&[String]>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Strs(v)) => Ok(Some(v)),
            Some(a) => Err(wrong(name, "strings", a)),
        }
    }

    /// An optional dtype.
    pub fn dtype(&self, name: &str) -> Result<Option<DType>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::DType(v)) => Ok(Some(*v)),
            Some(a) => Err(wrong(name, "dtype", a)),
        }
    }

    /// An optional tensor.
    pub fn tensor(&self, name: &str) -> Result<Option<&Tensor>> {
        match self.0.get(name) {
            None => Ok(None),
            Some(Attr::Tensor(v)) => Ok(Some(v)),
            Some(a) => Err(wrong(name, "tensor", a)),
        }
    }

    /// A required sub-graph.
    pub fn graph(&self, name: &str) -> Result<&Graph> {
        match self.0.get(name) {
            None => Err(missing(name)),
            Some(Attr::Graph(g)) => Ok(g),
            Some(a) => Err(wrong(name, "graph", a)),
        }
    }

    /// Iterates over the sub-graphs held by these attributes.
    pub fn graphs(&self) -> impl Iterator<Item = (&str, &Graph)> {
        self.0.iter().filter_map(|(k, v)| match v {
            Attr::Graph(g) => Some((k.as_str(), &**g)),
            _ => None,
        })
    }
}
