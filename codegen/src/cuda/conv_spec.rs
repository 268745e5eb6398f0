//! The CUDA text of a [`ConvSpec`] that the three convolution kernels share: the
//! parameter list and the fused epilogue (bias, activation, broadcast residual, one
//! rounding at the store), written once so the kernels cannot disagree on it.

use super::elementwise::storage;
use super::support::{activation, store};
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
        let y = self.y_index("LL");
        let mut s = format!("float v_ = {acc};\n");
        if self.bias.is_some() {
            s += "v_ += gopt_ld(bias[oc]);\n";
        }
        let act = format!("v_ = {};\n", activation(self.act, "v_"));
        let res = match &self.residual {
            Some((_, rs)) => format!(
                "v_ += gopt_ld(res[{}]);\n",
                self.residual_index(rs, &y, "LL", "0")
            ),
            None => String::new(),
        };
        match self.order {
            EpilogueOrder::ActThenResidual => s += &(act + &res),
            EpilogueOrder::ResidualThenAct => s += &(res + &act),
        }
        s += &format!("out[{y}] = {};\n", store(self.out_dt, "v_"));
        s
    }
}

/// Indents every line of `code` by `n` spaces.
pub fn indent(code: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    code.lines().map(|l| format!("{pad}{l}\n")).collect()
}
