//! Element-wise WGSL: a single op or a `FusedElementwise` body (the same bodies the
//! CUDA emitter gets, from [`crate::body`]) over f32 or f16 storage, with static
//! broadcast index math. Math is f32; each value rounds once, at the store. Types WGSL
//! storage cannot hold directly (bf16, 8/16/64-bit integers, bool) and ops without a
//! WGSL form yet are `Unsupported`, by name.

use super::{WgslKernel, WORKGROUP};
use crate::template::fill;
use crate::{CodegenError, Result};
use gopt_ir::ops::ElementwiseOp as E;
use gopt_ir::{Attrs, DType, Graph, Node, Op, ValueId};
use std::collections::HashMap;

const TEMPLATE: &str = include_str!("elementwise.wgsl");

fn unsupported(node: &Node, what: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        node: node.name.clone(),
        op: node.op.name().into(),
        backend: "WGSL",
        what: what.into(),
    }
}

/// The WGSL storage type of `dt`, if it has one.
fn storage(dt: DType) -> Option<&'static str> {
    match dt {
        DType::F32 => Some("f32"),
        DType::F16 => Some("f16"),
        DType::BF16
        | DType::F64
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U16
        | DType::U32
        | DType::U64
        | DType::Bool => None,
    }
}

fn static_shape(g: &Graph, node: &Node, v: ValueId) -> Result<(DType, Vec<usize>)> {
    let t = g.ty(v).map_err(|e| CodegenError::Plan(e.to_string()))?;
    let s = gopt_ir::dim::concrete(&t.shape).ok_or_else(|| unsupported(node, "symbolic shapes"))?;
    Ok((t.dtype, s))
}

/// An f32 literal WGSL accepts (finite only).
fn literal(v: f64) -> Option<String> {
    let v = v as f32;
    v.is_finite().then(|| {
        let s = format!("{v:?}");
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    })
}

/// Emits the shader for element-wise node `node` of `g`.
pub fn emit(g: &Graph, node: &Node, name: &str) -> Result<WgslKernel> {
    let out = *node
        .outputs
        .first()
        .ok_or_else(|| unsupported(node, "no output"))?;
    let (odt, shape) = static_shape(g, node, out)?;
    let ost = storage(odt).ok_or_else(|| unsupported(node, format!("{odt} outputs")))?;
    let n: usize = shape.iter().product();
    let n32 = u32::try_from(n).map_err(|_| unsupported(node, "more than 2^32 elements"))?;
    let (body, params) = crate::body::of(g, node)?;
    let mut names: HashMap<ValueId, String> = HashMap::new();
    let mut bindings = String::new();
    let mut index = String::new();
    let mut loads = String::new();
    let mut f16 = odt == DType::F16;
    for (k, (&bv, &pv)) in body.inputs.iter().zip(&params).enumerate() {
        let (dt, s) = static_shape(g, node, pv)?;
        let st = storage(dt).ok_or_else(|| unsupported(node, format!("{dt} inputs")))?;
        f16 |= dt == DType::F16;
        bindings += &format!("@group(0) @binding({k}) var<storage, read> in{k}: array<{st}>;\n");
        let numel: usize = s.iter().product();
        let at = if numel == 1 {
            "0u".to_string()
        } else if s == shape {
            "i".to_string()
        } else {
            index += &offset_code(k, &s, &shape);
            format!("o{k}")
        };
        loads += &format!("        let a{k} = f32(in{k}[{at}]);\n");
        names.insert(bv, format!("a{k}"));
    }
    bindings += &format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<{ost}>;\n",
        params.len()
    );
    for (&v, t) in &body.constants {
        let lit = (t.len() == 1)
            .then(|| literal(t.to_f64_vec()[0]))
            .flatten()
            .ok_or_else(|| unsupported(node, "a constant that is not one finite number"))?;
        names.insert(v, lit);
    }
    let mut code = String::new();
    for (i, bn) in body.nodes.iter().enumerate() {
        let Op::Elementwise(op) = bn.op else {
            return Err(unsupported(
                node,
                format!("{} in an element-wise body", bn.op),
            ));
        };
        let args: Vec<Option<String>> = bn
            .inputs
            .iter()
            .map(|i| i.and_then(|v| names.get(&v).cloned()))
            .collect();
        let odt_b = body
            .ty(bn.outputs[0])
            .map_err(|e| CodegenError::Plan(e.to_string()))?
            .dtype;
        if storage(odt_b).is_none() {
            return Err(unsupported(node, format!("{} producing {odt_b}", bn.op)));
        }
        let e = expr(op, &bn.attrs, &args).map_err(|what| unsupported(node, what))?;
        code += &format!("        let t{i} = {e};\n");
        names.insert(bn.outputs[0], format!("t{i}"));
    }
    let result = body
        .outputs
        .first()
        .and_then(|o| names.get(o))
        .cloned()
        .ok_or_else(|| unsupported(node, "a body without output"))?;
    let store = if odt == DType::F16 {
        format!("f16({result})")
    } else {
        result
    };
    let source = fill(
        TEMPLATE,
        &[
            ("enable", if f16 { "enable f16;\n" } else { "" }),
            (
                "what",
                &format!(
                    "{} `{}`",
                    node.op.name(),
                    node.name.replace(['\n', '`'], " ")
                ),
            ),
            ("bindings", &bindings),
            ("n", &n32.to_string()),
            ("index", &index),
            ("loads", &loads),
            ("body", &code),
            ("store", &store),
        ],
    )?;
    Ok(WgslKernel {
        name: name.to_string(),
        node: node.name.clone(),
        source,
        workgroups: [n32.div_ceil(WORKGROUP).clamp(1, 65535), 1, 1],
        inputs: params.iter().map(|v| v.0).collect(),
        outputs: vec![out.0],
    })
}

/// `o{k}`: the element of broadcast input `k` (shape `s`) for output index `i`.
fn offset_code(k: usize, s: &[usize], out: &[usize]) -> String {
    let pad = out.len() - s.len();
    let mut code =
        format!("        var o{k}: u32 = 0u;\n        {{\n            var r: u32 = i;\n");
    let mut stride = 1usize;
    let mut strides = vec![0usize; out.len()];
    for a in (0..out.len()).rev() {
        let d = if a >= pad { s[a - pad] } else { 1 };
        strides[a] = if d == 1 { 0 } else { stride };
        stride *= d;
    }
    for a in (0..out.len()).rev() {
        if strides[a] != 0 {
            code += &format!(
                "            o{k} = o{k} + (r % {}u) * {}u;\n",
                out[a], strides[a]
            );
        }
        code += &format!("            r = r / {}u;\n", out[a]);
    }
    code + "        }\n"
}

fn fattr(a: &Attrs, name: &str, d: f32) -> std::result::Result<String, String> {
    let v = a.float_or(name, d).map_err(|e| e.to_string())?;
    literal(f64::from(v)).ok_or_else(|| format!("a non-finite {name}"))
}

/// The op over f32 arguments (`None`: an absent optional input).
fn expr(op: E, a: &Attrs, args: &[Option<String>]) -> std::result::Result<String, String> {
    let x = |i: usize| -> std::result::Result<&str, String> {
        args.get(i)
            .and_then(|a| a.as_deref())
            .ok_or_else(|| format!("input {i}"))
    };
    let fold = |f: &str| -> std::result::Result<String, String> {
        let xs: Vec<&str> = args.iter().flatten().map(String::as_str).collect();
        let (first, rest) = xs.split_first().ok_or("no inputs")?;
        Ok(rest.iter().fold(first.to_string(), |acc, v| match f {
            "+" => format!("({acc} + {v})"),
            f => format!("{f}({acc}, {v})"),
        }))
    };
    Ok(match op {
        E::Add => format!("({} + {})", x(0)?, x(1)?),
        E::Sub => format!("({} - {})", x(0)?, x(1)?),
        E::Mul => format!("({} * {})", x(0)?, x(1)?),
        E::Div => format!("({} / {})", x(0)?, x(1)?),
        E::Pow => {
            // WGSL's pow is undefined for negative bases: odd integer exponents keep
            // the sign, as ONNX (numpy) does.
            let (b, e) = (x(0)?, x(1)?);
            format!(
                "select(pow(abs({b}), {e}), select(pow(abs({b}), {e}), -pow(abs({b}), {e}), abs({e} % 2.0) == 1.0), {b} < 0.0 && {e} == floor({e}))"
            )
        }
        E::Neg => format!("(-{})", x(0)?),
        E::Abs => format!("abs({})", x(0)?),
        E::Reciprocal => format!("(1.0 / {})", x(0)?),
        E::Sqrt => format!("sqrt({})", x(0)?),
        E::Exp => format!("exp({})", x(0)?),
        E::Log => format!("log({})", x(0)?),
        E::Ceil => format!("ceil({})", x(0)?),
        E::Floor => format!("floor({})", x(0)?),
        E::Round => format!("round({})", x(0)?),
        E::Sign => format!("sign({})", x(0)?),
        E::Sin => format!("sin({})", x(0)?),
        E::Cos => format!("cos({})", x(0)?),
        E::Tan => format!("tan({})", x(0)?),
        E::Tanh => format!("tanh({})", x(0)?),
        E::Sigmoid => format!("gopt_sigmoid({})", x(0)?),
        E::Erf => format!("gopt_erf({})", x(0)?),
        E::Relu => format!("max({}, 0.0)", x(0)?),
        E::LeakyRelu => {
            let v = x(0)?;
            format!(
                "select({v} * {}, {v}, {v} >= 0.0)",
                fattr(a, "alpha", 0.01)?
            )
        }
        E::Elu => {
            let v = x(0)?;
            format!(
                "select({} * (exp({v}) - 1.0), {v}, {v} >= 0.0)",
                fattr(a, "alpha", 1.0)?
            )
        }
        E::HardSigmoid => format!(
            "clamp({} * {} + {}, 0.0, 1.0)",
            fattr(a, "alpha", 0.2)?,
            x(0)?,
            fattr(a, "beta", 0.5)?
        ),
        E::HardSwish => {
            let v = x(0)?;
            format!("({v} * clamp({v} / 6.0 + 0.5, 0.0, 1.0))")
        }
        E::Softplus => format!("log(1.0 + exp({}))", x(0)?),
        E::Softsign => {
            let v = x(0)?;
            format!("({v} / (1.0 + abs({v})))")
        }
        E::Gelu => {
            let v = x(0)?;
            match a.str_or("approximate", "none").map_err(|e| e.to_string())? {
                "tanh" => format!(
                    "(0.5 * {v} * (1.0 + tanh(0.7978845608 * ({v} + 0.044715 * {v} * {v} * {v}))))"
                ),
                _ => format!("(0.5 * {v} * (1.0 + gopt_erf({v} * 0.7071067812)))"),
            }
        }
        E::Swish => {
            let v = x(0)?;
            format!("({v} * gopt_sigmoid({} * {v}))", fattr(a, "alpha", 1.0)?)
        }
        E::Max => fold("max")?,
        E::Min => fold("min")?,
        E::Sum => fold("+")?,
        E::Mean => format!("({} / {}.0)", fold("+")?, args.iter().flatten().count()),
        E::Clip => {
            let mut e = x(0)?.to_string();
            if let Some(Some(lo)) = args.get(1) {
                e = format!("max({e}, {lo})");
            }
            if let Some(Some(hi)) = args.get(2) {
                e = format!("min({e}, {hi})");
            }
            e
        }
        // Float to float: the store rounds.
        E::Cast | E::CastLike | E::Dropout => x(0)?.to_string(),
        E::Mod
        | E::Asin
        | E::Acos
        | E::Atan
        | E::Sinh
        | E::Cosh
        | E::Asinh
        | E::Acosh
        | E::Atanh
        | E::Selu
        | E::Celu
        | E::ThresholdedRelu
        | E::Shrink
        | E::Mish
        | E::PRelu
        | E::Not
        | E::And
        | E::Or
        | E::Xor
        | E::BitwiseNot
        | E::BitwiseAnd
        | E::BitwiseOr
        | E::BitwiseXor
        | E::BitShift
        | E::IsNaN
        | E::IsInf
        | E::Equal
        | E::Less
        | E::LessOrEqual
        | E::Greater
        | E::GreaterOrEqual
        | E::Where
        | E::BitCast
        | E::Bernoulli
        | E::RandomUniform
        | E::RandomNormal
        | E::RandomUniformLike
        | E::RandomNormalLike
        | E::Multinomial => return Err(format!("{op:?} (no WGSL form yet)")),
    })
}
