//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss in CUDA
//! ([`crate::lower::loss`]): f32, f16 or bf16 scores and weights computed in f32, i32
//! or i64 targets each checked on the device (one that is neither `ignore_index` nor a
//! class raises the node's code in the run's error word, as the CPU fails). For
//! SoftmaxCrossEntropyLoss each target's thread takes the log-softmax of its position
//! over the classes (shifted by their maximum) and writes the log-probabilities when
//! they are an output. `none` runs one thread per target; `sum` and `mean` one block
//! that sums the losses and the weights with warp shuffles, in a fixed order.

use super::elementwise::storage;
use super::support::{blocks, store};
use super::Kernel;
use crate::lower::loss::{Reduction, Spec};
use crate::plan::IndexCheck;
use crate::template::fill;
use crate::Result;
use gopt_ir::DType;

const TEMPLATE: &str = include_str!("loss.cu");

/// `v` as a C `long long` literal (`i64::MIN` has none).
fn ll(v: i64) -> String {
    match v {
        i64::MIN => "(-9223372036854775807LL - 1)".into(),
        v => format!("{v}LL"),
    }
}

/// The end of a `sum` or `mean` kernel: the block's sum of the losses (and `extra`
/// lines, the weights' sum), and `result` stored by thread 0.
fn block_total(ydt: DType, result: &str, extra: &str) -> String {
    format!(
        "    __shared__ float red[32];\n    const float total = gopt_block_sum(ls, red);\n{extra}    if (threadIdx.x == 0) y[0] = {};\n",
        store(ydt, result)
    )
}

/// Emits the kernel of spec `sp`.
pub fn emit(sp: &Spec, name: &str) -> Result<Kernel> {
    let (c, d) = (sp.c, sp.d);
    let floats = [Some(sp.scores), sp.weight, Some(sp.loss), sp.log_prob];
    // The parser took floats only; CUDA's loss kernels compute in float.
    if floats.iter().flatten().any(|(_, dt)| *dt == DType::F64) {
        return Err(sp
            .site
            .unsupported("f64 scores, weights or losses")
            .for_backend(super::BACKEND));
    }
    let code = sp.code;
    let param = |what: &str, (_, dt): (gopt_ir::ValueId, DType)| {
        format!("const {}* __restrict__ {what}", storage(dt))
    };
    let mut params = vec![param("x", sp.scores), param("tgt", sp.targets)];
    let mut inputs = vec![sp.scores.0 .0, sp.targets.0 .0];
    let weight = match sp.weight {
        Some(w) => {
            params.push(param("weight", w));
            inputs.push(w.0 .0);
            "gopt_ld(weight[t])"
        }
        None => "1.0f",
    };
    let (yv, ydt) = sp.loss;
    params.push(format!("{}* __restrict__ y", storage(ydt)));
    let mut outputs = vec![yv.0];
    let at = |k: &str| format!("gopt_ld(x[base + {k} * {d}LL])");
    let (prep, xk) = if sp.softmax {
        let write = match sp.log_prob {
            Some((lv, ldt)) => {
                params.push(format!("{}* __restrict__ logp", storage(ldt)));
                outputs.push(lv.0);
                let v = store(ldt, &format!("{} - shift", at("j")));
                format!(
                    "        for (long long j = 0; j < {c}LL; ++j) logp[base + j * {d}LL] = {v};\n"
                )
            }
            None => String::new(),
        };
        (
            format!(
                "        float mx = __int_as_float(0xff800000);\n        for (long long j = 0; j < {c}LL; ++j) mx = fmaxf(mx, {x});\n        float se = 0.0f;\n        for (long long j = 0; j < {c}LL; ++j) se += expf({x} - mx);\n        const float shift = mx + logf(se);\n{write}",
                x = at("j")
            ),
            format!("{} - shift", at("t")),
        )
    } else {
        (String::new(), at("t"))
    };
    params.push("unsigned int* __restrict__ gopt_err".into());
    let none = sp.reduction == Reduction::None;
    // `none`: threads over the whole grid write a loss each; `sum` and `mean`: the
    // threads of one block accumulate, then the block sums.
    let how = if none {
        "one thread per target"
    } else {
        "summed by one block"
    };
    let (start, step, grid) = if none {
        (
            "(long long)blockIdx.x * blockDim.x + threadIdx.x",
            "(long long)gridDim.x * blockDim.x",
            blocks(sp.m, 256),
        )
    } else {
        ("(long long)threadIdx.x", "256LL", 1)
    };
    let each = match sp.reduction {
        Reduction::None => format!("        y[i] = {};\n", store(ydt, "loss")),
        Reduction::Sum | Reduction::Mean => String::new(),
    };
    let finish = match sp.reduction {
        Reduction::None => String::new(),
        Reduction::Sum => block_total(ydt, "total", ""),
        Reduction::Mean => block_total(
            ydt,
            "total / weights",
            "    const float weights = gopt_block_sum(ws, red);\n",
        ),
    };
    let ignored = match sp.ignore_index {
        Some(v) => format!("t == {}", ll(v)),
        None => "false".into(),
    };
    let source = fill(
        TEMPLATE,
        &[
            ("name", name),
            ("params", &params.join(", ")),
            ("what", sp.site.op),
            ("reduction", sp.reduction.name()),
            ("how", how),
            ("m", &sp.m.to_string()),
            ("c", &c.to_string()),
            ("d", &d.to_string()),
            ("start", start),
            ("step", step),
            ("cd", &(c * d).to_string()),
            ("prep", &prep),
            ("ignored", &ignored),
            ("code", &code.to_string()),
            ("weight", weight),
            ("xk", &xk),
            ("each", &each),
            ("finish", &finish),
        ],
    )?;
    Ok(Kernel {
        name: name.to_string(),
        node: sp.site.node.clone(),
        source,
        threads: grid as usize * 256,
        vectorized: false,
        inputs,
        outputs,
        shared_mem: 0,
        grid,
        block: 256,
        index_check: Some(IndexCheck {
            code,
            op: sp.site.op.into(),
            what: sp.out_of_range(),
        }),
    })
}
