//! The printer. Values are numbered in order of definition (inputs, captures, constants,
//! then node outputs in topological order), so two graphs that differ only in arena
//! layout print the same and snapshot diffs show real changes.

use crate::attr::{Attr, Attrs};
use crate::graph::{Graph, ValueId};
use crate::konst::Const;
use crate::tensor::Tensor;
use crate::with_tensor;
use std::collections::HashMap;
use std::fmt::Write;

/// How much of the constant data to print.
#[derive(Clone, Copy, Debug)]
pub struct PrintOptions {
    /// Constants with more elements than this print as a size and content hash instead of
    /// their data (such text does not parse back). `usize::MAX` prints everything.
    pub max_inline_elements: usize,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            max_inline_elements: usize::MAX,
        }
    }
}

/// Prints a graph in the text format, every constant in full (round-trips through
/// [`super::parse`]).
pub fn print(g: &Graph) -> String {
    print_with(g, PrintOptions::default())
}

/// Prints a graph with options (e.g. eliding large constants for snapshots).
pub fn print_with(g: &Graph, opts: PrintOptions) -> String {
    let mut out = String::new();
    Printer {
        opts,
        out: &mut out,
    }
    .graph(g, 0);
    out
}

struct Printer<'a> {
    opts: PrintOptions,
    out: &'a mut String,
}

fn indent(n: usize) -> String {
    "  ".repeat(n)
}

impl Printer<'_> {
    fn graph(&mut self, g: &Graph, depth: usize) {
        // Canonical numbering: definition order.
        let mut num: HashMap<ValueId, usize> = HashMap::new();
        let next = |v: ValueId, num: &mut HashMap<ValueId, usize>| {
            let k = num.len();
            num.entry(v).or_insert(k);
        };
        for &v in &g.inputs {
            next(v, &mut num);
        }
        for &v in &g.captures {
            next(v, &mut num);
        }
        for &v in g.constants.keys() {
            next(v, &mut num);
        }
        let order: Vec<usize> = match g.topo_order() {
            Ok(o) => o.into_iter().map(|n| n.index()).collect(),
            Err(_) => (0..g.nodes.len()).collect(),
        };
        for &i in &order {
            for &o in &g.nodes[i].outputs {
                next(o, &mut num);
            }
        }
        // Values referenced but never defined still get numbers, after the rest.
        for n in &g.nodes {
            for v in n.inputs.iter().flatten() {
                next(*v, &mut num);
            }
        }
        for &v in &g.outputs {
            next(v, &mut num);
        }
        let r = |v: ValueId| format!("%{}", num[&v]);
        let decl = |v: ValueId| {
            let val = g.value(v);
            match &val.ty {
                Some(t) => format!("%{} {}: {}", num[&v], quote(&val.name), t),
                None => format!("%{} {}", num[&v], quote(&val.name)),
            }
        };
        let ins: Vec<String> = g.inputs.iter().map(|&v| decl(v)).collect();
        let outs: Vec<String> = g.outputs.iter().map(|&v| r(v)).collect();
        let _ = write!(
            self.out,
            "graph {}({}) -> ({})",
            quote(&g.name),
            ins.join(", "),
            outs.join(", ")
        );
        if !g.captures.is_empty() {
            let caps: Vec<String> = g.captures.iter().map(|&v| decl(v)).collect();
            let _ = write!(self.out, " captures({})", caps.join(", "));
        }
        self.out.push_str(" {\n");
        for (&v, t) in &g.constants {
            let _ = write!(self.out, "{}{} = const ", indent(depth + 1), decl(v));
            self.const_data(t);
            self.out.push('\n');
        }
        for &i in &order {
            let n = &g.nodes[i];
            let outs: Vec<String> = n.outputs.iter().map(|&v| decl(v)).collect();
            let ins: Vec<String> = n
                .inputs
                .iter()
                .map(|i| i.map(|v| r(v)).unwrap_or_else(|| "_".into()))
                .collect();
            let _ = write!(
                self.out,
                "{}{} = {} {}({})",
                indent(depth + 1),
                outs.join(", "),
                n.op,
                quote(&n.name),
                ins.join(", ")
            );
            self.attrs(&n.attrs, depth + 1);
            self.out.push('\n');
        }
        let _ = write!(self.out, "{}}}", indent(depth));
        if depth == 0 {
            self.out.push('\n');
        }
    }

    fn attrs(&mut self, a: &Attrs, depth: usize) {
        if a.0.is_empty() {
            return;
        }
        self.out.push_str(" {");
        for (i, (k, v)) in a.0.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            let _ = write!(self.out, "{k}=");
            self.attr(v, depth);
        }
        self.out.push('}');
    }

    fn attr(&mut self, v: &Attr, depth: usize) {
        match v {
            Attr::Int(i) => {
                let _ = write!(self.out, "{i}");
            }
            Attr::Float(f) => self.out.push_str(&float(*f as f64, true)),
            Attr::Str(s) => self.out.push_str(&quote(s)),
            Attr::Ints(v) => {
                let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                let _ = write!(self.out, "ints[{}]", items.join(","));
            }
            Attr::Floats(v) => {
                let items: Vec<String> = v.iter().map(|x| float(*x as f64, true)).collect();
                let _ = write!(self.out, "floats[{}]", items.join(","));
            }
            Attr::Strs(v) => {
                let items: Vec<String> = v.iter().map(|x| quote(x)).collect();
                let _ = write!(self.out, "strs[{}]", items.join(","));
            }
            Attr::DType(d) => {
                let _ = write!(self.out, "dtype {d}");
            }
            Attr::Tensor(t) => {
                let _ = write!(self.out, "tensor {}{:?} ", t.dtype(), t.shape());
                self.tensor_data(t);
            }
            Attr::Graph(g) => self.graph(g, depth),
        }
    }

    fn const_data(&mut self, t: &Const) {
        if t.len() > self.opts.max_inline_elements {
            let _ = write!(self.out, "<{} elements, fnv {:016x}>", t.len(), fnv(t));
            return;
        }
        self.tensor_data(t.tensor());
    }

    fn tensor_data(&mut self, t: &Tensor) {
        if t.len() > self.opts.max_inline_elements {
            let _ = write!(
                self.out,
                "<{} elements, fnv {:016x}>",
                t.len(),
                crate::konst::fingerprint_tensor(t)
            );
            return;
        }
        let is_f32 = matches!(t, Tensor::F32(_) | Tensor::F16(_) | Tensor::BF16(_));
        let items: Vec<String> = with_tensor!(t, a => a.iter().map(|x| elem(x, is_f32)).collect());
        let _ = write!(self.out, "[{}]", items.join(", "));
    }
}

fn elem<T: crate::tensor::Elem>(x: &T, short: bool) -> String {
    match T::DTYPE {
        crate::DType::Bool => (x.to_i64() != 0).to_string(),
        d if d.is_float() => float(x.to_f64(), short),
        _ => x.to_i64().to_string(),
    }
}

/// Shortest round-tripping text of a float; `short` when the value came from f32 (or a
/// narrower type), so it is printed at f32 precision.
fn float(v: f64, short: bool) -> String {
    if short {
        format!("{:?}", v as f32)
    } else {
        format!("{v:?}")
    }
}

/// Quotes a name or string with Rust-style escapes.
pub fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// A cheap content fingerprint for elided constants ([`Const::fingerprint`]: a lazy
/// weight view hashes its recipe, so printing never computes a weight).
fn fnv(t: &Const) -> u64 {
    t.fingerprint()
}
