//! The activation functions RNN, GRU and LSTM accept by name in their `activations`
//! attribute, with `activation_alpha`/`activation_beta` consumed in order by the
//! functions that take them (as ONNX Runtime reads them), defaulting as the ONNX ops of
//! the same name do.

use super::rnn::Cell;
use crate::attr::Attrs;
use crate::error::{IrError, Result};
use crate::ops::attention::real::{real, Real};

/// An activation function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sigmoid,
    Tanh,
    Relu,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name.to_ascii_lowercase().as_str() {
            "sigmoid" => Kind::Sigmoid,
            "tanh" => Kind::Tanh,
            "relu" => Kind::Relu,
            "affine" => Kind::Affine,
            "leakyrelu" => Kind::LeakyRelu,
            "thresholdedrelu" => Kind::ThresholdedRelu,
            "scaledtanh" => Kind::ScaledTanh,
            "hardsigmoid" => Kind::HardSigmoid,
            "elu" => Kind::Elu,
            "softsign" => Kind::Softsign,
            "softplus" => Kind::Softplus,
            _ => return None,
        })
    }

    /// Default alpha and beta, `None` where the function takes no such parameter.
    fn defaults(self) -> (Option<f64>, Option<f64>) {
        match self {
            Kind::Affine => (Some(1.0), Some(0.0)),
            Kind::LeakyRelu => (Some(0.01), None),
            Kind::ThresholdedRelu | Kind::Elu => (Some(1.0), None),
            Kind::ScaledTanh => (Some(1.0), Some(1.0)),
            Kind::HardSigmoid => (Some(0.2), Some(0.5)),
            Kind::Sigmoid | Kind::Tanh | Kind::Relu | Kind::Softsign | Kind::Softplus => {
                (None, None)
            }
        }
    }
}

/// An activation with its parameters.
#[derive(Clone, Copy, Debug)]
pub(super) struct Act {
    kind: Kind,
    alpha: f64,
    beta: f64,
}

impl Act {
    /// Applies the function.
    pub(super) fn apply<F: Real>(self, x: F) -> F {
        let (a, b): (F, F) = (real(self.alpha), real(self.beta));
        let (zero, one) = (F::zero(), F::one());
        match self.kind {
            Kind::Sigmoid => one / (one + (-x).exp()),
            Kind::Tanh => x.tanh(),
            Kind::Relu => x.max(zero),
            Kind::Affine => a * x + b,
            Kind::LeakyRelu => {
                if x >= zero {
                    x
                } else {
                    a * x
                }
            }
            Kind::ThresholdedRelu => {
                if x > a {
                    x
                } else {
                    zero
                }
            }
            Kind::ScaledTanh => a * (b * x).tanh(),
            Kind::HardSigmoid => (a * x + b).max(zero).min(one),
            Kind::Elu => {
                if x >= zero {
                    x
                } else {
                    a * (x.exp() - one)
                }
            }
            Kind::Softsign => x / (one + x.abs()),
            Kind::Softplus => (one + x.exp()).ln(),
        }
    }
}

/// The activations of every direction, `dirs * k` of them for a cell with `k`.
pub(super) fn parse_activations(cell: Cell, attrs: &Attrs, dirs: usize) -> Result<Vec<Act>> {
    let per_dir: &[&str] = match cell {
        Cell::Rnn => &["Tanh"],
        Cell::Gru => &["Sigmoid", "Tanh"],
        Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
    };
    let names: Vec<String> = match attrs.strs("activations")? {
        Some(v) => v.to_vec(),
        None => (0..dirs)
            .flat_map(|_| per_dir.iter().map(|s| s.to_string()))
            .collect(),
    };
    let want = per_dir.len() * dirs;
    // A single direction's list is repeated for both directions, as ONNX Runtime does.
    let names = if names.len() == per_dir.len() && dirs == 2 {
        [names.clone(), names].concat()
    } else {
        names
    };
    if names.len() != want {
        return Err(IrError::Attr {
            name: "activations".into(),
            msg: format!("{} functions given, {want} expected", names.len()),
        });
    }
    let mut alphas = attrs.floats("activation_alpha")?.unwrap_or(&[]).iter();
    let mut betas = attrs.floats("activation_beta")?.unwrap_or(&[]).iter();
    names
        .iter()
        .map(|n| {
            let kind = Kind::parse(n).ok_or_else(|| {
                IrError::Unsupported(format!("recurrent activation function {n:?}"))
            })?;
            let (da, db) = kind.defaults();
            let alpha = da.map_or(0.0, |d| alphas.next().map_or(d, |&v| f64::from(v)));
            let beta = db.map_or(0.0, |d| betas.next().map_or(d, |&v| f64::from(v)));
            Ok(Act { kind, alpha, beta })
        })
        .collect()
}
