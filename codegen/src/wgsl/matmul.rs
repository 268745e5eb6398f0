//! `MatMul` and `FusedMatMul` in WGSL: a register-tiled SIMT GEMM with the whole
//! epilogue in the same shader, `act(alpha·A·B + bias) + residual`, fp32 accumulation
//! and one rounding at the store. Why this shape: a GEMM is bound by how many operands
//! each shared-memory read feeds, so a workgroup of 256 invocations computes a
//! 128×128, 128×64 or 64×64 output tile ([`tile`]: the largest that still fills the
//! GPU; small-M problems take 32×64, 32×32 or 16×32 tiles of 128, 64 or 32 invocations
//! so batch-1 transformers still get a workgroup per SM) and each invocation an
//! 8×8 / 8×4 / 4×4 block of it by outer products of vec4
//! reads from K slices staged in workgroup memory (A transposed to [K][M], B as
//! [K][N]), with cooperative vec4 global loads where rows are multiples of 4 (scalar,
//! bounds-checked ones otherwise) prefetched into registers during the multiply. All
//! per-invocation state is unrolled here into named registers: drivers (NVIDIA's, as
//! measured) put indexed private arrays in local memory. Batches are the z dispatch
//! dimension; a B without batch dims is shared (A's batch dims fold into M).
//! Problems that still leave the GPU idle with K ≥ 256 split K inside the workgroup
//! instead (`gemm_split.rs`, `matmul_split.wgsl`: 256 invocations, groups of a small
//! tile's size each multiplying part of every staged K block, reduced before the store).

use super::{refuse, WgslKernel};
use crate::lower::gemm::GemmSpec;
use crate::lower::support::Site;
use crate::template::fill;
use crate::Result;
use gopt_ir::ops::fused::Activation;
use gopt_ir::DType;

use super::gemm_split::split;
use super::gemm_tile::{tile, Operand};

const TEMPLATE: &str = include_str!("matmul.wgsl");
const SPLIT_TEMPLATE: &str = include_str!("matmul_split.wgsl");

/// The error for a form of `site` this shader does not take.
fn unsupported(site: &Site, what: impl Into<String>) -> crate::CodegenError {
    refuse(site, &what.into())
}

fn storage(site: &Site, dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        other => Err(unsupported(site, format!("{other} operands"))),
    }
}

fn act_code(act: Activation) -> String {
    match act {
        Activation::None => String::new(),
        Activation::Relu => "        v = max(v, 0.0);\n".into(),
        Activation::Gelu => "        v = 0.5 * v * (1.0 + gopt_erf(v * 0.7071067812));\n".into(),
        Activation::GeluTanh => {
            "        v = 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)));\n"
                .into()
        }
        Activation::Silu => "        v = v * gopt_sigmoid(v);\n".into(),
        Activation::Tanh => "        v = tanh(v);\n".into(),
        Activation::Sigmoid => "        v = gopt_sigmoid(v);\n".into(),
        Activation::Clip { lo, hi } => format!(
            "        v = min(max(v, {:?}), {:?});\n",
            lo.max(f64::from(f32::MIN)) as f32,
            hi.min(f64::from(f32::MAX)) as f32
        ),
    }
}

/// Emits the GEMM shader for `spec`.
pub fn emit(spec: &GemmSpec, name: &str) -> Result<WgslKernel> {
    let site = &spec.site;
    let (p, pr) = (&spec.parts, &spec.problem);
    let (act, alpha, trans_b) = (p.act, p.alpha, p.trans_b);
    let (a, b, out) = (pr.a, pr.b, pr.out);
    let (dt, odt) = (pr.dtype, pr.out_dtype);
    let (m, n, k, batch) = (pr.m, pr.n, pr.k, pr.batch);
    let (stride_a, stride_b) = (pr.stride_a, pr.stride_b);
    let total = m * n * batch;
    // vec4 loads where every row of the operand starts on a multiple of 4 elements
    // (bindings start at offset 0, batch strides are multiples of the row length).
    let a_vec = k % 4 == 0;
    let b_vec = if trans_b { k % 4 == 0 } else { n % 4 == 0 };
    let operand = |name: &str, dt: DType, vec: bool| -> Result<String> {
        let t = storage(site, dt)?;
        let t = if vec {
            format!("vec4<{t}>")
        } else {
            t.to_string()
        };
        Ok(format!("var<storage, read> {name}: array<{t}>;"))
    };
    let mut bindings = vec![operand("a", dt, a_vec)?, operand("b", dt, b_vec)?];
    let mut inputs = vec![a.0, b.0];
    let mut f16 = [dt, odt].contains(&DType::F16);
    let mut epilogue = String::new();
    let mut formula = format!("{}(alpha·A·B", act.name());
    if let Some(bias) = &spec.tail.bias {
        let (dt, s) = (bias.dtype, &bias.shape);
        if s.iter().product::<usize>() != n || s.last() != Some(&n) {
            return Err(unsupported(site, "a bias that is not one value per column"));
        }
        f16 |= dt == DType::F16;
        bindings.push(format!(
            "var<storage, read> bias: array<{}>;",
            storage(site, dt)?
        ));
        inputs.push(bias.id.0);
        epilogue += "        v = v + f32(bias[col]);\n";
        formula += " + bias";
    }
    formula += ")";
    epilogue += &act_code(act);
    if let Some(res) = &spec.tail.residual {
        let (dt, s) = (res.dtype, &res.shape);
        if s.iter().product::<usize>() != total {
            return Err(unsupported(site, "a residual that broadcasts"));
        }
        f16 |= dt == DType::F16;
        bindings.push(format!(
            "var<storage, read> res: array<{}>;",
            storage(site, dt)?
        ));
        inputs.push(res.id.0);
        epilogue += "        v = v + f32(res[o]);\n";
        formula += " + residual";
    }
    let ost = storage(site, odt)?;
    bindings.push(format!("var<storage, read_write> y: array<{ost}>;"));
    let bindings: Vec<String> = bindings
        .iter()
        .enumerate()
        .map(|(i, s)| format!("@group(0) @binding({i}) {s}"))
        .collect();
    let u32_of = |v: usize| -> Result<String> {
        u32::try_from(v)
            .map(|v| v.to_string())
            .map_err(|_| unsupported(site, "sizes past 2^32"))
    };
    for v in [m * k * batch, k * n * batch, total] {
        u32_of(v)?;
    }
    if batch > 65535 {
        return Err(unsupported(site, "more than 65535 batches"));
    }
    let regular = tile(batch, m, n);
    let sp = split(batch, m, n, k, &regular);
    // The loads cover a whole staged K block (split: all groups' slices, by all).
    let (t, lt) = match &sp {
        Some(sp) => (&sp.tile, sp.load_tile()),
        None => (&regular, tile(batch, m, n)),
    };
    let (tiles_m, tiles_n) = (m.div_ceil(t.bm), n.div_ceil(t.bn));
    let a_op = Operand {
        buf: "a",
        reg: "ra",
        smem: "As",
        stride: "SA",
        tile: t.bm,
        origin: "m0",
        bound: "M",
        base: "abase",
        k_rows: true,
        vec: a_vec,
        gather: None,
    };
    let b_op = Operand {
        buf: "b",
        reg: "rb",
        smem: "Bs",
        stride: "SB",
        tile: t.bn,
        origin: "n0",
        bound: "N",
        base: "bbase",
        k_rows: trans_b,
        vec: b_vec,
        gather: None,
    };
    let (da, la, sa) = a_op.code(&lt);
    let (db, lb, sb) = b_op.code(&lt);
    let (fma, decls, put) = t.body();
    let split_desc = sp.as_ref().map_or(String::new(), |sp| {
        format!(", split-K in {} groups of {}", sp.s, t.threads())
    });
    let desc = format!(
        "{}x{} tiles, K slices of {}{split_desc}; A by {}, B{} by {}",
        t.bm,
        t.bn,
        t.bk,
        if a_vec { "vec4" } else { "scalar" },
        if trans_b { " (transposed)" } else { "" },
        if b_vec { "vec4" } else { "scalar" }
    );
    let mut holes = match &sp {
        Some(sp) => {
            let (as_len, bs_len) = sp.lens();
            let n = |v: usize| v.to_string();
            vec![
                ("bm", n(t.bm)),
                ("bn", n(t.bn)),
                ("bk", n(t.bk)),
                ("kb", n(sp.kb)),
                ("s", n(sp.s)),
                ("group", n(t.threads())),
                ("nx", n(t.nx)),
                ("threads", n(lt.threads())),
                ("sa", n(t.bm / 4 + 1)),
                ("sb", n(t.bn / 4 + 1)),
                ("as_len", n(as_len)),
                ("bs_len", n(bs_len)),
                ("reduce", sp.reduce()),
            ]
        }
        None => t.holes(),
    };
    holes.extend([
        ("enable", super::enable_f16(f16).to_string()),
        ("what", site.op.to_string()),
        ("formula", formula),
        ("desc", desc),
        ("bindings", bindings.join("\n")),
        ("tiles_m", u32_of(tiles_m)?),
        ("tiles_n", u32_of(tiles_n)?),
        ("m", u32_of(m)?),
        ("n", u32_of(n)?),
        ("k", u32_of(k)?),
        ("stride_a", u32_of(stride_a)?),
        ("stride_b", u32_of(stride_b)?),
        ("stride_d", u32_of(m * n)?),
        ("alpha", format!("{:?}", alpha)),
        ("epilogue", epilogue),
        ("store", format!("{ost}(v)")),
        ("decls", da + &db + &decls),
        ("load", la + &lb),
        ("stage", sa + &sb),
        ("fma", fma),
        ("out", put),
    ]);
    let holes: Vec<(&str, &str)> = holes.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let source = fill(
        if sp.is_some() {
            SPLIT_TEMPLATE
        } else {
            TEMPLATE
        },
        &holes,
    )?;
    let workgroups = [
        tiles_n.clamp(1, 65535) as u32,
        tiles_m.clamp(1, 65535) as u32,
        batch as u32,
    ];
    Ok(WgslKernel {
        name: name.to_string(),
        node: site.node.clone(),
        source,
        workgroups,
        inputs,
        outputs: vec![out.0],
        index_check: None,
        loop_iterations: None,
    })
}
