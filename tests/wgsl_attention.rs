//! The WGSL attention shader (codegen/src/wgsl/attention.rs) on a real wgpu adapter
//! against the CPU interpreter (CI: Mesa's lavapipe; a machine without any adapter fails
//! here, never skips). Cases: the Attention nodes of the shared models (bert_small,
//! gpt2_small; fp32 and fp16; batch 1 × seq 128 and batch 2 × seq 7) on their own
//! inputs, and a hand-built matrix in f32 and f16 (the CUDA attention test's, plus
//! more): no mask, an additive `[B,1,1,S]` mask in the data's type, a BERT-style fp32
//! `[1,1,S,S]` mask, a 2-D fp32 mask, a boolean `[B,1,S,S]` mask, causal with and without
//! a mask; head sizes 32, 36 and 64, sequences of 1, 77 and 128; grouped-query heads,
//! cross attention, masks shorter than the keys, 512 keys, head sizes 6, 16, 30, 128, 160
//! and 256, and 3-D (heads packed in the hidden dim) layouts. Masks kill some rows
//! entirely (they must come out as zeros).
//!
//! f32: every element within rtol 1e-4 / atol 1e-5 (exp, summation order and the
//! reference's split of the scale over Q and K differ in the last bits). f16: against the
//! interpreter in fp32 on the same f16 inputs, relative L2 at most 1e-2 and every element
//! within 2e-2 + 2e-2 relative; and against the interpreter in f16 (which rounds scores
//! and probabilities to f16), relative L2 at most 1e-2.

use gopt::codegen::wgsl::{attention, emit_kernels, WgslKernel};
use gopt::codegen::CodegenError;
use gopt::ir::ops::{AttentionOp, EvalCx};
use gopt::ir::{DType, Graph, Node, Op, Tensor};
use gopt::pipeline::{specialize, Options};
use gopt::runtime::wgpu::WgpuDevice;
use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{node_inputs, random};

/// The attention kernel of `node` as the planner makes it: lowered, then written.
fn emit_attention(
    g: &Graph,
    node: &gopt::ir::Node,
    name: &str,
) -> Result<WgslKernel, gopt::codegen::CodegenError> {
    let a =
        gopt::codegen::lower::attention::lower(g, node, gopt::codegen::wgsl::VIEWS.strided_reads)
            .map_err(|e| e.for_backend("WGSL"))?;
    attention::emit(&a, name)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum MaskKind {
    None,
    /// Additive, `[B,1,1,Skv]`, in the data's type.
    Keys,
    /// Additive fp32 `[1,1,Sq,Skv]` (the BERT export's form).
    Full,
    /// Additive fp32 `[Sq,Skv]`.
    Plain,
    /// Boolean `[B,1,Sq,Skv]`.
    Bool,
    /// `is_causal=1`, no mask.
    Causal,
    /// `is_causal=1` and a `[B,1,1,Skv]` mask.
    CausalKeys,
    /// Boolean `[1,1,1,keys]` with `keys` < Skv: the rest are masked.
    Short(usize),
}

#[derive(Clone, Copy, Debug)]
struct Case {
    dt: DType,
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    sq: usize,
    skv: usize,
    head: usize,
    mask: MaskKind,
    three_d: bool,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}_b{}_h{}x{}_q{}_k{}_d{}_{:?}{}",
            self.dt,
            self.batch,
            self.q_heads,
            self.kv_heads,
            self.sq,
            self.skv,
            self.head,
            self.mask,
            if self.three_d { "_3d" } else { "" }
        )
        .to_lowercase()
    }

    fn mask_type(&self) -> Option<(DType, Vec<usize>)> {
        let (b, sq, skv) = (self.batch, self.sq, self.skv);
        match self.mask {
            MaskKind::None | MaskKind::Causal => None,
            MaskKind::Keys | MaskKind::CausalKeys => Some((self.dt, vec![b, 1, 1, skv])),
            MaskKind::Full => Some((DType::F32, vec![1, 1, sq, skv])),
            MaskKind::Plain => Some((DType::F32, vec![sq, skv])),
            MaskKind::Bool => Some((DType::Bool, vec![b, 1, sq, skv])),
            MaskKind::Short(n) => Some((DType::Bool, vec![1, 1, 1, n])),
        }
    }

    fn shapes(&self) -> [Vec<usize>; 2] {
        let (b, d) = (self.batch, self.head);
        if self.three_d {
            [
                vec![b, self.sq, self.q_heads * d],
                vec![b, self.skv, self.kv_heads * d],
            ]
        } else {
            [
                vec![b, self.q_heads, self.sq, d],
                vec![b, self.kv_heads, self.skv, d],
            ]
        }
    }

    /// The one-node graph, written in gopt's text form.
    fn graph(&self) -> Graph {
        let t = |s: &[usize]| {
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let dt = self.dt;
        let [q, kv] = self.shapes();
        let (q, kv) = (t(&q), t(&kv));
        let mut params = format!("%0 \"q\": {dt}[{q}], %1 \"k\": {dt}[{kv}], %2 \"v\": {dt}[{kv}]");
        let mut args = "%0, %1, %2".to_string();
        if let Some((mdt, ms)) = self.mask_type() {
            params += &format!(", %3 \"m\": {mdt}[{}]", t(&ms));
            args += ", %3";
        }
        let mut attrs = Vec::new();
        if matches!(self.mask, MaskKind::Causal | MaskKind::CausalKeys) {
            attrs.push("is_causal=1".to_string());
        }
        if self.three_d {
            attrs.push(format!("kv_num_heads={}", self.kv_heads));
            attrs.push(format!("q_num_heads={}", self.q_heads));
        }
        // An explicit scale on even head sizes, the default (1/sqrt(head)) on odd ones.
        if self.head.is_multiple_of(2) {
            attrs.push(format!("scale={:.8}", 0.9 / (self.head as f64).sqrt()));
        }
        let src = format!(
            "graph \"g\"({params}) -> (%4) {{\n  %4 \"y\": {dt}[{q}] = Attention \"attn\"({args}) {{{}}}\n}}",
            attrs.join(", ")
        );
        let g = gopt::ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        gopt::ir::verify(g)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .into_inner()
    }
}

fn cases(dt: DType) -> Vec<Case> {
    use MaskKind::*;
    // batch, q heads, kv heads, q len, kv len, head size, mask, 3-D.
    let mut list = Vec::new();
    for mask in [None, Keys, Full, Bool, Causal] {
        for head in [32, 36, 64] {
            for s in [1, 77, 128] {
                list.push((2, 3, 3, s, s, head, mask, false));
            }
        }
    }
    list.extend([
        (1, 4, 2, 77, 128, 64, None, false),
        (1, 4, 2, 77, 128, 64, Causal, false),
        (2, 4, 2, 77, 128, 64, CausalKeys, false),
        (1, 4, 2, 128, 77, 36, Causal, false),
        (1, 4, 2, 200, 200, 36, Short(150), false),
        (1, 4, 2, 9, 40, 30, Short(1), false),
        (1, 4, 4, 512, 512, 64, Keys, false),
        (1, 2, 1, 33, 17, 16, Full, false),
        (1, 4, 2, 45, 45, 6, Plain, false),
        (2, 4, 2, 50, 61, 30, Bool, false),
        (1, 4, 2, 100, 100, 128, Causal, false),
        (1, 4, 2, 40, 40, 160, Keys, false),
        (1, 4, 2, 21, 21, 256, Causal, false),
        (2, 6, 2, 37, 37, 32, Keys, true),
        (1, 3, 3, 19, 19, 30, Causal, true),
    ]);
    list.into_iter()
        .map(
            |(batch, q_heads, kv_heads, sq, skv, head, mask, three_d)| Case {
                dt,
                batch,
                q_heads,
                kv_heads,
                sq,
                skv,
                head,
                mask,
                three_d,
            },
        )
        .collect()
}

/// The case's mask: random values with masked entries, and some rows masked entirely.
/// Fully masked rows use -inf (`f32::MIN` appears only next to unmasked keys).
fn mask_tensor(c: &Case, seed: u64) -> Option<Tensor> {
    let (dt, shape) = c.mask_type()?;
    let n: usize = shape.iter().product();
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let r = random(DType::F32, &shape, seed).to_f64_vec();
    let vals: Vec<f64> = (0..n)
        .map(|x| {
            let (i, j) = ((x / cols) % rows, x % cols);
            let dead_row = rows > 1 && i % 7 == 3;
            match c.mask {
                MaskKind::Bool | MaskKind::Short(_) => {
                    if dead_row || r[x] < -1.0 {
                        0.0
                    } else {
                        1.0
                    }
                }
                MaskKind::Keys | MaskKind::CausalKeys if j % 5 == 4 => f64::NEG_INFINITY,
                MaskKind::Full | MaskKind::Plain if dead_row => f64::NEG_INFINITY,
                MaskKind::Full | MaskKind::Plain if j % 3 == 1 => f32::MIN as f64,
                _ => r[x],
            }
        })
        .collect();
    Some(Tensor::from_f64s(dt, &shape, &vals).expect("mask"))
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = want.iter().map(|b| b * b).sum();
    (num / den.max(1e-30)).sqrt()
}

fn eval(node: &Node, ins: &[Option<&Tensor>]) -> Tensor {
    let lookup = |_: &str| None;
    node.op
        .eval(&EvalCx { lookup: &lookup }, node, ins)
        .unwrap_or_else(|e| panic!("interpreter: {}: {e}", node.name))
        .swap_remove(0)
}

/// Runs `k` for `node` on `values` (by value id) and compares it with the interpreter;
/// the worst error (absolute in f32, relative L2 in f16).
fn check(
    dev: &WgpuDevice,
    g: &Graph,
    node: &Node,
    k: &WgslKernel,
    values: &BTreeMap<u32, Tensor>,
) -> Result<f64, String> {
    let ins: Vec<Option<&Tensor>> = node
        .inputs
        .iter()
        .map(|i| i.and_then(|v| values.get(&v.0)))
        .collect();
    // WGSL storage has no bool: one u32 per element.
    let stored: Vec<Tensor> = k
        .inputs
        .iter()
        .map(|v| match &values[v] {
            t if t.dtype() == DType::Bool => t.cast(DType::U32),
            t => t.clone(),
        })
        .collect();
    let params: Vec<&Tensor> = stored.iter().collect();
    let ty = g.ty(node.outputs[0]).expect("typed");
    let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
    let got = dev
        .run_kernel(k, &params, &[(ty.dtype, shape)])
        .map_err(|e| e.to_string())?
        .swap_remove(0);
    let g64 = got.to_f64_vec();
    if let Some(i) = g64.iter().position(|x| !x.is_finite()) {
        return Err(format!("element {i} is {}", g64[i]));
    }
    if ty.dtype == DType::F32 {
        let w = eval(node, &ins).to_f64_vec();
        let mut worst: f64 = 0.0;
        for (i, (a, b)) in g64.iter().zip(&w).enumerate() {
            let err = (a - b).abs();
            if err > 1e-5 + 1e-4 * b.abs() {
                return Err(format!("element {i}: wgpu {a}, interpreter {b}"));
            }
            worst = worst.max(err);
        }
        return Ok(worst);
    }
    let wide: Vec<Tensor> = ins
        .iter()
        .flatten()
        .map(|t| match t.dtype() {
            DType::F16 => t.cast(DType::F32),
            _ => (*t).clone(),
        })
        .collect();
    let w = eval(node, &wide.iter().map(Some).collect::<Vec<_>>()).to_f64_vec();
    for (i, (a, b)) in g64.iter().zip(&w).enumerate() {
        if (a - b).abs() > 2e-2 + 2e-2 * b.abs() {
            return Err(format!("element {i}: wgpu {a}, interpreter (fp32) {b}"));
        }
    }
    let native = rel_l2(&g64, &eval(node, &ins).to_f64_vec());
    let rel = rel_l2(&g64, &w);
    if rel > 1e-2 || native > 1e-2 {
        return Err(format!(
            "relative L2 {rel:.3e} (fp32 interpreter), {native:.3e} (f16 interpreter)"
        ));
    }
    Ok(rel.max(native))
}

fn open() -> WgpuDevice {
    let dev = WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "wgsl: adapter {} ({}, {}), f16 {}",
        dev.adapter.name, dev.adapter.kind, dev.adapter.backend, dev.adapter.f16
    );
    dev
}

#[test]
fn attention_cases_match_the_interpreter_on_an_adapter() {
    let dev = open();
    let mut failures = Vec::new();
    let mut checked = 0;
    for dt in [DType::F32, DType::F16] {
        let mut worst: f64 = 0.0;
        for (ci, c) in cases(dt).iter().enumerate() {
            let g = c.graph();
            let node = &g.nodes[0];
            let k =
                emit_attention(&g, node, "attn").unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            gopt::codegen::wgsl::validate(&k).unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            let seed = 1000 * ci as u64;
            let [qs, kvs] = c.shapes();
            let mut values = BTreeMap::new();
            values.insert(0, random(dt, &qs, seed + 1));
            values.insert(1, random(dt, &kvs, seed + 2));
            values.insert(2, random(dt, &kvs, seed + 3));
            if let Some(m) = mask_tensor(c, seed + 4) {
                values.insert(3, m);
            }
            match check(&dev, &g, node, &k, &values) {
                Ok(e) => worst = worst.max(e),
                Err(m) => failures.push(format!("{}: {m}", c.label())),
            }
            checked += 1;
        }
        let what = if dt == DType::F32 {
            "abs error"
        } else {
            "relative L2"
        };
        println!("wgsl attention {dt}: worst {what} {worst:.3e}");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("wgsl: {checked} attention cases match the interpreter");
}

#[test]
fn model_attention_nodes_match_the_interpreter_on_an_adapter() {
    let dev = open();
    let mut checked = 0;
    for name in ["bert_small", "gpt2_small"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/models")
            .join(name)
            .join("model.onnx");
        let model = gopt::load_model(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (batch, seq) in [(1u64, 128u64), (2, 7)] {
            for precision in ["fp32", "fp16"] {
                let b: BTreeMap<String, u64> = [("batch", batch), ("seq", seq)]
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect();
                let opts = Options::new()
                    .precision(gopt::Precision::from_name(precision).expect("precision"));
                let v =
                    specialize(&model.model, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
                let g = &v.graph;
                let (kernels, others) = emit_kernels(g).unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    others.iter().all(|(_, why)| !why.contains("Attention")),
                    "{name} {precision}: {others:?}"
                );
                let mut here = 0;
                let mut worst: f64 = 0.0;
                for (ki, n) in g.nodes.iter().enumerate() {
                    if n.op != Op::Attention(AttentionOp::Attention) {
                        continue;
                    }
                    let k = kernels
                        .iter()
                        .find(|k| k.node == n.name)
                        .unwrap_or_else(|| panic!("{name}: no kernel for {}", n.name));
                    let values = node_inputs(g, n, (ki * 31) as u64 + 11);
                    let e = check(&dev, g, n, k, &values).unwrap_or_else(|m| {
                        panic!("{name} {precision} b{batch} s{seq}: `{}`: {m}", n.name)
                    });
                    worst = worst.max(e);
                    here += 1;
                }
                assert!(here > 0, "{name} {precision}: no Attention node");
                println!(
                    "wgsl: {name} {precision} b{batch} s{seq}: {here} attention nodes, worst {worst:.3e}"
                );
                checked += here;
            }
        }
    }
    println!("wgsl: {checked} model attention nodes match the interpreter");
}

fn refused(src: &str) -> (String, String) {
    let g = gopt::ir::verify(gopt::ir::text::parse(src).expect("parses"))
        .expect("verifies")
        .into_inner();
    match emit_attention(&g, &g.nodes[0], "k") {
        Err(CodegenError::Unsupported { node, what, .. }) => (node, what),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, got a kernel"),
    }
}

#[test]
fn unsupported_modes_are_refused_by_name() {
    // Softcap, windows, a KV cache and a narrower value head run on the general
    // kernel (checked against the interpreter by the conformance cases); bf16 has no
    // WGSL storage and a 512-wide head no room in workgroup memory.
    for (dt, head, want) in [("bf16", 32, "bf16"), ("f32", 512, "head size")] {
        let (node, what) = refused(&format!(
            "graph \"g\"(%0 \"q\": {dt}[1,2,8,{head}], %1 \"k\": {dt}[1,2,8,{head}], %2 \"v\": {dt}[1,2,8,{head}]) -> (%9) {{\n  %9 \"y\": {dt}[1,2,8,{head}] = Attention \"bad\"(%0, %1, %2)\n}}"
        ));
        assert_eq!(node, "bad");
        assert!(what.contains(want), "{what} (want {want})");
    }
}

/// Median wall time of `run_kernel` over `n` runs, µs.
fn wall_us(
    dev: &WgpuDevice,
    k: &WgslKernel,
    ins: &[&Tensor],
    out: &(DType, Vec<usize>),
    n: usize,
) -> f64 {
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = std::time::Instant::now();
            dev.run_kernel(k, ins, std::slice::from_ref(out))
                .expect("runs");
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[n / 2]
}

/// BERT-base/GPT-2 shaped attention (12 heads of 64, 128 tokens) on the preferred
/// adapter. `run_kernel` uploads, dispatches and reads back each time, so the shader's
/// own time is the difference between the shader and the same shader recomputing every
/// batch `r = 6400 / batch` times more (same results), divided by `r`: a throughput, so
/// at batch 1 it is the time per launch with the GPU full, not one launch's latency.
#[test]
#[ignore = "timing: run on a GPU adapter"]
fn attention_timing() {
    let dev = open();
    println!("| case | µs | TFLOP/s |\n|---|---:|---:|");
    for (dt, batch, mask) in [
        (DType::F32, 32, MaskKind::None),
        (DType::F32, 32, MaskKind::Keys),
        (DType::F32, 32, MaskKind::Causal),
        (DType::F16, 32, MaskKind::None),
        (DType::F16, 32, MaskKind::Keys),
        (DType::F32, 1, MaskKind::None),
        (DType::F16, 1, MaskKind::Keys),
    ] {
        let c = Case {
            dt,
            batch,
            q_heads: 12,
            kv_heads: 12,
            sq: 128,
            skv: 128,
            head: 64,
            mask,
            three_d: false,
        };
        let r = 6400 / batch as u32;
        let g = c.graph();
        let k = emit_attention(&g, &g.nodes[0], "attn").expect("kernel");
        let mut rep = k.clone();
        let from = "let b = wid.z;";
        assert!(rep.source.contains(from));
        rep.source = rep
            .source
            .replace(from, &format!("let b = wid.z % {batch}u;"));
        rep.workgroups[2] *= r + 1;
        let [qs, kvs] = c.shapes();
        let mut ins = vec![random(dt, &qs, 1), random(dt, &kvs, 2), random(dt, &kvs, 3)];
        ins.extend(mask_tensor(&c, 4));
        let ins: Vec<&Tensor> = ins.iter().collect();
        let out = (dt, qs.clone());
        wall_us(&dev, &rep, &ins, &out, 2);
        let one = wall_us(&dev, &k, &ins, &out, 9);
        let many = wall_us(&dev, &rep, &ins, &out, 9);
        let us = (many - one) / f64::from(r);
        let mut flops = 4.0 * (batch * 12 * 128 * 128 * 64) as f64;
        if mask == MaskKind::Causal {
            flops /= 2.0;
        }
        println!(
            "| {dt} B={batch} {mask:?} ({:?} workgroups) | {us:.1} | {:.2} |",
            k.workgroups,
            flops / (us * 1e-6) / 1e12
        );
    }
}
