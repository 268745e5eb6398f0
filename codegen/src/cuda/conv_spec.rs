//! The CUDA text of a [`ConvSpec`] that the three convolution kernels share: the
//! parameter list and the fused epilogue (bias, activation, broadcast residual, one
//! rounding at the store), written once so the kernels cannot disagree on it.

use super::elementwise::storage;
use super::support::{activation, store, strides};
pub use crate::lower::conv::ConvSpec;
use gopt_ir::ops::fused::EpilogueOrder;

impl ConvSpec {
    /// The kernel parameter list: x, w, bias?, res?, out.
    pub fn params(&self) -> String {
        let t = storage(self.x_dt);
        let mut p = vec![
            format!("const {t}* __restrict__ x"),
            format!("const {t}* __restrict__ w"),
        ];
        if let Some(b) = self.bias {
            p.push(format!("const {}* __restrict__ bias", storage(b)));
        }
        if let Some((r, _)) = &self.residual {
            p.push(format!("const {}* __restrict__ res", storage(*r)));
        }
        p.push(format!("{}* __restrict__ out", storage(self.out_dt)));
        p.join(", ")
    }

    /// The epilogue for accumulator expression `acc` of output channel `oc`, image `n`
    /// and output position `p` (long long variables in scope): bias, then activation
    /// and residual in the node's order, one rounding at the store.
    pub fn epilogue(&self, acc: &str) -> String {
        let (m, p) = (self.m, self.p());
        let y = if self.nhwc {
            format!("(n * {p}LL + p) * {m}LL + oc")
        } else {
            format!("(n * {m}LL + oc) * {p}LL + p")
        };
        let mut s = format!("float v_ = {acc};\n");
        if self.bias.is_some() {
            s += "v_ += gopt_ld(bias[oc]);\n";
        }
        let act = format!("v_ = {};\n", activation(self.act, "v_"));
        let res = match &self.residual {
            Some((_, rs)) => format!("v_ += gopt_ld(res[{}]);\n", self.residual_index(rs, &y)),
            None => String::new(),
        };
        match self.order {
            EpilogueOrder::ActThenResidual => s += &(act + &res),
            EpilogueOrder::ResidualThenAct => s += &(res + &act),
        }
        s += &format!("out[{y}] = {};\n", store(self.out_dt, "v_"));
        s
    }

    /// The residual's offset for the output element at `y` (numpy broadcasting).
    fn residual_index(&self, rs: &[usize], y: &str) -> String {
        if rs == self.y_shape.as_slice() {
            return y.to_string();
        }
        let ow = self.ow;
        let sp: Vec<String> = if self.spatial == 1 {
            vec!["p".into()]
        } else {
            vec![format!("(p / {ow}LL)"), format!("(p % {ow}LL)")]
        };
        let mut coords = vec!["n".to_string()];
        if self.nhwc {
            coords.extend(sp);
            coords.push("oc".into());
        } else {
            coords.push("oc".into());
            coords.extend(sp);
        }
        let lead = coords.len() - rs.len();
        let st = strides(rs);
        let terms: Vec<String> = rs
            .iter()
            .enumerate()
            .filter(|(_, &d)| d != 1)
            .map(|(a, _)| format!("{} * {}LL", coords[a + lead], st[a]))
            .collect();
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }
}

/// Indents every line of `code` by `n` spaces.
pub fn indent(code: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    code.lines().map(|l| format!("{pad}{l}\n")).collect()
}
