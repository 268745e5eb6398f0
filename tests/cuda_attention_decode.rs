//! The CUDA decode attention kernel (codegen/src/cuda/attention_decode.rs): one or a few
//! query rows per head against many keys, as a language model runs it while generating.
//! A matrix of cases, each dimension swept against the others: f32, bf16 and f16; batch
//! 1 and 3; (query, KV) heads (32, 4), (12, 12) and (8, 2); head sizes 64, 128, 80 and 16;
//! 1 and 2 query rows; 1, 7, 128, 1000 and 4096 keys; no mask, an additive `[B,1,1,S]`
//! mask in the data's type, a boolean `[B,1,1,S]` one, an additive f32 `[1,1,Sq,S]` one,
//! a boolean mask shorter than the keys, causal. Beyond it: the most query rows the
//! kernel takes, one KV head for 32 query heads (rows over several blocks), head sizes 36
//! and 256, 3-D inputs, and Q, K and V read in place from one fused tensor.
//!
//! Without a GPU (CI): every kernel compiles with NVRTC for sm_90 down to machine code
//! without spills (and one with a cluster for sm_80, where clusters do not exist), the
//! kernel takes exactly the nodes it should, and one kernel's source is snapshotted. On a
//! GPU (`#[ignore]`d here; scripts/gpu-check.sh runs them): every case against the
//! interpreter, rows with every key masked included, and the decode timings as a plan
//! runs the kernel (replayed from a CUDA graph, K and V read from memory rather than L2),
//! in µs and GB/s of K and V read, beside a kernel that only reads the same bytes.

use gopt::codegen::cuda::attention::{self, decode};
use gopt::codegen::cuda::Kernel;
use gopt::ir::ops::EvalCx;
use gopt::ir::{DType, Graph, Tensor};
use gopt::runtime::cuda::Device;
use std::collections::BTreeMap;

mod common;
use common::{compile_sass, nvrtc_ready, random};

/// The attention kernel of `node` as the planner makes it: lowered, then written.
fn emit_attention(
    g: &Graph,
    node: &gopt::ir::Node,
    name: &str,
) -> Result<Kernel, gopt::codegen::CodegenError> {
    let a =
        gopt::codegen::lower::attention::lower(g, node, gopt::codegen::cuda::VIEWS.strided_reads)
            .map_err(|e| e.for_backend("CUDA"))?;
    attention::emit(&a, name)
}

/// The mask a case gives the node.
#[derive(Clone, Copy, Debug, PartialEq)]
enum MaskKind {
    None,
    /// Additive, `[B,1,1,Skv]`, in the data's type.
    Keys,
    /// Boolean `[B,1,1,Skv]`.
    Bool,
    /// Additive f32 `[1,1,Sq,Skv]`.
    Full,
    /// Boolean `[1,1,1,n]`, n < Skv: the other keys are masked.
    Short,
    /// `is_causal=1`, no mask.
    Causal,
}

const MASKS: [MaskKind; 6] = [
    MaskKind::None,
    MaskKind::Keys,
    MaskKind::Bool,
    MaskKind::Full,
    MaskKind::Short,
    MaskKind::Causal,
];

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
    /// 3-D inputs: the heads packed in the hidden dim.
    three_d: bool,
    /// Q, K and V cut from one 3-D tensor by a Split (so `sq == skv`), read in place.
    fused: bool,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}_b{}_h{}x{}_q{}_k{}_d{}_{:?}{}{}",
            self.dt,
            self.batch,
            self.q_heads,
            self.kv_heads,
            self.sq,
            self.skv,
            self.head,
            self.mask,
            if self.three_d { "_3d" } else { "" },
            if self.fused { "_fused" } else { "" }
        )
        .to_lowercase()
    }

    fn mask_type(&self) -> Option<(DType, Vec<usize>)> {
        let (b, sq, skv) = (self.batch, self.sq, self.skv);
        match self.mask {
            MaskKind::None | MaskKind::Causal => None,
            MaskKind::Keys => Some((self.dt, vec![b, 1, 1, skv])),
            MaskKind::Bool => Some((DType::Bool, vec![b, 1, 1, skv])),
            MaskKind::Full => Some((DType::F32, vec![1, 1, sq, skv])),
            MaskKind::Short => Some((DType::Bool, vec![1, 1, 1, skv / 2 + 1])),
        }
    }

    /// The shapes of Q (and the output) and of K and V.
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

    /// The graph in gopt's text form: the attention node, after a Split when fused.
    fn graph(&self) -> Graph {
        let t = |s: &[usize]| {
            let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
            v.join(",")
        };
        let dt = self.dt;
        let [qs, kvs] = self.shapes();
        let (q, kv) = (t(&qs), t(&kvs));
        let mut attrs = String::new();
        if self.mask == MaskKind::Causal {
            attrs += "is_causal=1, ";
        }
        if self.three_d {
            attrs += &format!(
                "kv_num_heads={}, q_num_heads={}, ",
                self.kv_heads, self.q_heads
            );
        }
        attrs += &format!("scale={:.8}", 1.0 / (self.head as f64).sqrt());
        let mask = self
            .mask_type()
            .map(|(mdt, ms)| format!("{mdt}[{}]", t(&ms)));
        let src = if self.fused {
            assert!(self.three_d && self.sq == self.skv && mask.is_none());
            let (wq, wk) = (qs[2], kvs[2]);
            let (b, s) = (self.batch, self.sq);
            format!(
                "graph \"g\"(%0 \"qkv\": {dt}[{b},{s},{}]) -> (%5) {{\n  %1 \"s\": i64[3] = const [{wq}, {wk}, {wk}]\n  \
                 %2 \"q\": {dt}[{q}], %3 \"k\": {dt}[{kv}], %4 \"v\": {dt}[{kv}] = Split \"sp\"(%0, %1) {{axis=2}}\n  \
                 %5 \"y\": {dt}[{q}] = Attention \"attn\"(%2, %3, %4) {{{attrs}}}\n}}",
                wq + 2 * wk
            )
        } else {
            let mut params =
                format!("%0 \"q\": {dt}[{q}], %1 \"k\": {dt}[{kv}], %2 \"v\": {dt}[{kv}]");
            let mut args = "%0, %1, %2".to_string();
            if let Some(m) = &mask {
                params += &format!(", %3 \"m\": {m}");
                args += ", %3";
            }
            format!(
                "graph \"g\"({params}) -> (%4) {{\n  %4 \"y\": {dt}[{q}] = Attention \"attn\"({args}) {{{attrs}}}\n}}"
            )
        };
        let g = gopt::ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        gopt::ir::verify(g)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .into_inner()
    }

    /// The decode kernel the CUDA writer gives the attention node (the graph's last).
    fn kernel(&self, g: &Graph) -> Kernel {
        let node = g.nodes.last().expect("a node");
        let k = emit_attention(g, node, &format!("dec_{}", self.label()))
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()));
        assert!(is_decode(&k), "{}: not the decode kernel", self.label());
        k
    }
}

fn is_decode(k: &Kernel) -> bool {
    k.source.starts_with("// Flash decoding")
}

/// The matrix: every (heads, head size, keys) triple, the mask, query rows and batch
/// cycling through their values underneath (each mask meets both row counts and both
/// batches), then the shapes beyond it.
fn cases(dt: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for (q_heads, kv_heads) in [(32, 4), (12, 12), (8, 2)] {
        for head in [64, 128, 80, 16] {
            for skv in [1, 7, 128, 1000, 4096] {
                let n = v.len();
                v.push(Case {
                    dt,
                    batch: [1, 3][(n / 12) % 2],
                    q_heads,
                    kv_heads,
                    sq: [1, 2][(n / 6) % 2],
                    skv,
                    head,
                    mask: MASKS[n % 6],
                    three_d: false,
                    fused: false,
                });
            }
        }
    }
    let base = Case {
        dt,
        batch: 1,
        q_heads: 32,
        kv_heads: 4,
        sq: 1,
        skv: 1000,
        head: 64,
        mask: MaskKind::None,
        three_d: false,
        fused: false,
    };
    v.extend([
        // The most query rows: 32 rows per KV head.
        Case {
            sq: decode::MAX_SQ,
            mask: MaskKind::Bool,
            ..base
        },
        Case {
            sq: decode::MAX_SQ,
            head: 128,
            skv: 4096,
            mask: MaskKind::Full,
            ..base
        },
        // One KV head for 32 query heads: its 96 rows over several blocks.
        Case {
            batch: 2,
            kv_heads: 1,
            sq: 3,
            head: 128,
            mask: MaskKind::Keys,
            ..base
        },
        // A head off the 16-column products, the largest head, and a long cache.
        Case {
            q_heads: 12,
            kv_heads: 12,
            skv: 128,
            head: 36,
            mask: MaskKind::Keys,
            ..base
        },
        Case {
            q_heads: 8,
            kv_heads: 2,
            head: 256,
            mask: MaskKind::Bool,
            ..base
        },
        Case {
            skv: 8192,
            mask: MaskKind::Keys,
            ..base
        },
        // 3-D inputs, and Q, K, V read in place from one fused projection.
        Case {
            three_d: true,
            batch: 3,
            mask: MaskKind::Keys,
            ..base
        },
        Case {
            three_d: true,
            q_heads: 8,
            kv_heads: 2,
            sq: 2,
            skv: 128,
            head: 80,
            mask: MaskKind::Full,
            ..base
        },
        Case {
            three_d: true,
            fused: true,
            batch: 2,
            q_heads: 8,
            kv_heads: 2,
            sq: 3,
            skv: 3,
            ..base
        },
    ]);
    v
}

const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];

#[test]
fn decode_kernels_compile_for_sm90_without_spills() {
    nvrtc_ready();
    let mut n = 0;
    for dt in DTYPES {
        let kernels: Vec<Kernel> = cases(dt).iter().map(|c| c.kernel(&c.graph())).collect();
        let src = gopt::codegen::cuda::module_source(&kernels);
        let log = compile_sass(&src, "sm_90")
            .unwrap_or_else(|e| panic!("{dt}: NVRTC rejected the module:\n{e}"));
        let spills: Vec<&str> = log.lines().filter(|l| l.contains("spill")).collect();
        assert!(
            spills.len() >= kernels.len(),
            "{dt}: no ptxas report:\n{log}"
        );
        for line in spills {
            assert!(
                line.contains(" 0 bytes spill stores, 0 bytes spill loads"),
                "{dt}: {line}\n{log}"
            );
        }
        let report: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("Used") && l.contains("registers"))
            .collect();
        let most = report
            .iter()
            .filter_map(|l| {
                l.split("Used ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .max();
        println!(
            "{dt}: {} kernels, at most {most:?} registers a thread",
            kernels.len()
        );
        n += kernels.len();
    }
    println!("cuda: {n} decode attention kernels compiled for sm_90 (PTX and machine code)");
}

/// Before sm_90 there are no clusters: the kernel compiles without one and the first
/// block of each would-be cluster takes every key.
#[test]
fn a_split_kernel_compiles_without_clusters_for_sm80() {
    nvrtc_ready();
    let c = Case {
        skv: 4096,
        mask: MaskKind::Keys,
        ..cases(DType::BF16)[0]
    };
    let k = c.kernel(&c.graph());
    assert!(
        k.source.contains("__cluster_dims__(8, 1, 1)"),
        "{}",
        k.source
    );
    let src = gopt::codegen::cuda::module_source(std::slice::from_ref(&k));
    compile_sass(&src, "sm_80").unwrap_or_else(|e| panic!("sm_80:\n{e}"));
}

/// The decode kernel takes few query rows and nothing the general kernel must do; past
/// its limit the flash kernel takes the node.
#[test]
fn the_decode_kernel_takes_few_query_rows_only() {
    let lowered = |c: &Case| {
        let g = c.graph();
        let node = g.nodes.last().expect("a node").clone();
        let a = gopt::codegen::lower::attention::lower(&g, &node, true)
            .unwrap_or_else(|e| panic!("{e}"));
        (g, node, a)
    };
    for dt in DTYPES {
        for c in cases(dt) {
            assert!(decode::applies(&lowered(&c).2), "{}", c.label());
        }
    }
    let c = Case {
        sq: decode::MAX_SQ + 1,
        ..cases(DType::BF16)[0]
    };
    let (g, node, a) = lowered(&c);
    assert!(!decode::applies(&a));
    let k = emit_attention(&g, &node, "k").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !is_decode(&k) && k.source.contains("mma.sync"),
        "{}",
        k.source
    );
    // Softcap needs the general kernel, whatever the query rows.
    let src = r#"graph "g"(%0 "q": bf16[1,8,1,64], %1 "k": bf16[1,2,128,64], %2 "v": bf16[1,2,128,64]) -> (%3) {
  %3 "y": bf16[1,8,1,64] = Attention "capped"(%0, %1, %2) {softcap=30.0}
}"#;
    let g = gopt::ir::verify(gopt::ir::text::parse(src).expect("parses"))
        .expect("verifies")
        .into_inner();
    let a = gopt::codegen::lower::attention::lower(&g, &g.nodes[0], true).expect("lowers");
    assert!(a.general() && !decode::applies(&a));
    let k = emit_attention(&g, &g.nodes[0], "k").unwrap_or_else(|e| panic!("{e}"));
    assert!(!is_decode(&k));
}

#[test]
fn decode_source_snapshot() {
    let c = Case {
        skv: 4096,
        mask: MaskKind::Keys,
        ..cases(DType::BF16)[0]
    };
    let g = c.graph();
    let k = emit_attention(&g, &g.nodes[0], "k0_attention").expect("kernel");
    let src = format!("// grid {} x block {}\n{}", k.grid, k.block, k.source);
    insta::with_settings!({snapshot_path => "../snapshots/cuda", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("attention_decode_bf16_h32x4_d64_k4096_mask", src);
    });
}

// ---------------------------------------------------------------------------------
// On a GPU.

/// The case's mask: random values with masked keys. With batch 3, batch 1 of a
/// `[B,1,1,S]` mask masks every key; with two query rows, row 1 of a `[1,1,Sq,S]` mask
/// does: those rows must come out as zeros. `f32::MIN` appears only next to unmasked keys
/// (a row of it alone differs in the reference between f32 and bf16).
fn mask_tensor(c: &Case, seed: u64) -> Option<Tensor> {
    let (dt, shape) = c.mask_type()?;
    let n: usize = shape.iter().product();
    let (rows, cols) = (shape[2], shape[3]);
    let r = random(DType::F32, &shape, seed).to_f64_vec();
    let vals: Vec<f64> = (0..n)
        .map(|x| {
            let (b, i, j) = (x / (rows * cols), (x / cols) % rows, x % cols);
            let dead = (shape[0] > 1 && b == 1) || (rows > 1 && i == 1);
            match c.mask {
                MaskKind::Bool | MaskKind::Short => f64::from(u8::from(!dead && r[x] >= -1.0)),
                MaskKind::Keys | MaskKind::Full if dead => f64::NEG_INFINITY,
                MaskKind::Keys if j % 5 == 4 => f64::NEG_INFINITY,
                MaskKind::Full if j % 3 == 1 => f64::from(f32::MIN),
                _ => r[x],
            }
        })
        .collect();
    Some(Tensor::from_f64s(dt, &shape, &vals).expect("mask"))
}

/// The graph's inputs (random, the mask as [`mask_tensor`]) by value id.
fn inputs(c: &Case, g: &Graph, seed: u64) -> BTreeMap<u32, Tensor> {
    let mask = mask_tensor(c, seed + 9);
    g.inputs
        .iter()
        .enumerate()
        .map(|(x, v)| {
            let ty = g.ty(*v).expect("typed");
            let shape = gopt::ir::dim::concrete(&ty.shape).expect("static");
            let t = match (&mask, x) {
                (Some(m), 3) => m.clone(),
                _ => random(ty.dtype, &shape, seed + x as u64),
            };
            (v.0, t)
        })
        .collect()
}

/// The interpreter's output, node by node, in f32 on the same (rounded) values (bool
/// masks stay bool).
fn reference(g: &Graph, values: &BTreeMap<u32, Tensor>) -> Tensor {
    let mut env: BTreeMap<u32, Tensor> = values
        .iter()
        .map(|(k, t)| match t.dtype() {
            DType::F16 | DType::BF16 => (*k, t.cast(DType::F32)),
            _ => (*k, t.clone()),
        })
        .collect();
    for node in &g.nodes {
        let ins: Vec<Option<&Tensor>> = node
            .inputs
            .iter()
            .map(|i| i.and_then(|v| env.get(&v.0).or_else(|| g.constant(v))))
            .collect();
        let lookup = |_: &str| None;
        let outs = node
            .op
            .eval(&EvalCx { lookup: &lookup }, node, &ins)
            .unwrap_or_else(|e| panic!("{}: {e}", node.name));
        for (v, t) in node.outputs.iter().zip(outs) {
            env.insert(v.0, t);
        }
    }
    env.remove(&g.outputs[0].0).expect("the output")
}

/// f32: max abs error at most 1e-4 of the output's scale (its largest magnitude).
/// bf16/f16: relative L2 error at most 1e-2 and every element within 2e-2 + 2e-2
/// relative, against the interpreter in f32 on the same rounded inputs (the kernel rounds
/// P to the data's type for the product, and the output once). Rows the reference gives
/// as zeros (every key masked) must be exactly zero; returns the error and their count.
fn compare(c: &Case, got: &Tensor, want: &Tensor) -> Result<(f64, usize), String> {
    if got.dtype() != c.dt || got.shape() != want.shape() {
        return Err(format!(
            "{:?}{:?} vs {:?}",
            got.dtype(),
            got.shape(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    if let Some(i) = g.iter().position(|x| !x.is_finite()) {
        return Err(format!("element {i} is {}", g[i]));
    }
    let mut dead = 0;
    for (row, (gr, wr)) in g.chunks(c.head).zip(w.chunks(c.head)).enumerate() {
        if wr.iter().all(|x| *x == 0.0) {
            if gr.iter().any(|x| *x != 0.0) {
                return Err(format!("row {row}: every key masked, GPU {gr:?}"));
            }
            dead += 1;
        }
    }
    if c.dt == DType::F32 {
        let scale = w.iter().fold(1e-6f64, |m, x| m.max(x.abs()));
        let worst = g
            .iter()
            .zip(&w)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        if worst > 1e-4 * scale {
            return Err(format!(
                "max abs error {worst:.3e} for outputs up to {scale:.3e}"
            ));
        }
        return Ok((worst / scale, dead));
    }
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if (a - b).abs() > 2e-2 + 2e-2 * b.abs() {
            return Err(format!("element {i}: GPU {a}, CPU {b}"));
        }
    }
    let num: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let den: f64 = w.iter().map(|b| b * b).sum();
    let rel = (num / den.max(1e-30)).sqrt();
    if rel > 1e-2 {
        return Err(format!("relative L2 error {rel:.3e}"));
    }
    Ok((rel, dead))
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn decode_attention_matches_the_interpreter_on_the_gpu() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("device: {} ({})", dev.name, dev.arch);
    let (mut checked, mut dead) = (0, 0);
    let mut failures = Vec::new();
    for dt in DTYPES {
        let cases = cases(dt);
        let graphs: Vec<Graph> = cases.iter().map(Case::graph).collect();
        let kernels: Vec<Kernel> = cases
            .iter()
            .zip(&graphs)
            .map(|(c, g)| c.kernel(g))
            .collect();
        let module = dev
            .compile(
                &format!("decode attention {dt}"),
                &gopt::codegen::cuda::module_source(&kernels),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let mut worst: f64 = 0.0;
        for (ci, ((c, g), k)) in cases.iter().zip(&graphs).zip(&kernels).enumerate() {
            let values = inputs(c, g, 1000 * ci as u64);
            let want = reference(g, &values);
            let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
            let got = dev
                .run_kernel(&module, k, &params, &[(dt, want.shape().to_vec())])
                .unwrap_or_else(|e| panic!("{}: {e}", c.label()));
            match compare(c, &got[0], &want) {
                Ok((e, d)) => {
                    worst = worst.max(e);
                    dead += d;
                }
                Err(m) => failures.push(format!("{} (grid {}): {m}", c.label(), k.grid)),
            }
            checked += 1;
        }
        let what = if dt == DType::F32 {
            "max abs error / output scale"
        } else {
            "relative L2"
        };
        println!("attention decode {dt}: worst {what} {worst:.3e}");
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(dead > 0, "no case had a row with every key masked");
    println!("cuda: {checked} decode attention cases match the interpreter ({dead} fully masked rows gave zeros)");
}

fn esize(dt: DType) -> usize {
    match dt {
        DType::F32 | DType::U32 => 4,
        DType::Bool => 1,
        _ => 2,
    }
}

/// µs per launch of `k` as a plan runs it, replayed from a CUDA graph: `launches`
/// launches in one graph, launch n on input set n % `sets` (inputs of 0x3c bytes: finite
/// in every float type); the median of 50 replays after warm-up. Sets that together
/// outgrow the 60 MB L2 make every launch read K and V from memory, as a decoder does,
/// whose other layers' caches evict this one between steps.
fn graph_us(
    dev: &Device,
    k: &Kernel,
    ins: &[(DType, Vec<usize>)],
    out: (DType, &[usize]),
    sets: usize,
    launches: usize,
) -> f64 {
    use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
    use cudarc::driver::{CudaContext, CudaSlice, PushKernelArg};
    let ctx = CudaContext::new(0).unwrap_or_else(|e| panic!("{e:?}"));
    // One stream, used in order: no cross-stream events, which a capture would refuse.
    // SAFETY: every buffer below is made, used and freed on `stream` alone.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap_or_else(|e| panic!("{e:?}"));
    let src = gopt::codegen::cuda::module_source(std::slice::from_ref(k));
    let ptx = dev.ptx(&k.name, &src).unwrap_or_else(|e| panic!("{e}"));
    let module = ctx.load_module(ptx).unwrap_or_else(|e| panic!("{e:?}"));
    let f = module
        .load_function(&k.name)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let upload = |(dt, shape): &(DType, Vec<usize>)| -> CudaSlice<u8> {
        let n = shape.iter().product::<usize>() * esize(*dt);
        stream
            .clone_htod(&vec![0x3cu8; n.max(1)])
            .unwrap_or_else(|e| panic!("{e:?}"))
    };
    let data: Vec<Vec<CudaSlice<u8>>> = (0..sets)
        .map(|_| ins.iter().map(upload).collect())
        .collect();
    let n = out.1.iter().product::<usize>() * esize(out.0);
    let mut o: CudaSlice<u8> = stream
        .alloc_zeros(n.max(1))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let cfg = gopt::runtime::cuda::launch_config(k);
    stream.synchronize().unwrap_or_else(|e| panic!("{e:?}"));
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap_or_else(|e| panic!("{e:?}"));
    for l in 0..launches {
        let mut b = stream.launch_builder(&f);
        for buf in &data[l % sets] {
            b.arg(buf);
        }
        b.arg(&mut o);
        // SAFETY: the kernel's tensor inputs then its output, each as large as emitted.
        unsafe { b.launch(cfg) }.unwrap_or_else(|e| panic!("{e:?}"));
    }
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap_or_else(|e| panic!("{e:?}"))
        .expect("a graph");
    graph.upload().unwrap_or_else(|e| panic!("{e:?}"));
    for _ in 0..5 {
        graph.launch().unwrap_or_else(|e| panic!("{e:?}"));
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut us: Vec<f64> = (0..50)
        .map(|_| {
            let start = ctx.new_event(flags).unwrap_or_else(|e| panic!("{e:?}"));
            let end = ctx.new_event(flags).unwrap_or_else(|e| panic!("{e:?}"));
            start.record(&stream).unwrap_or_else(|e| panic!("{e:?}"));
            graph.launch().unwrap_or_else(|e| panic!("{e:?}"));
            end.record(&stream).unwrap_or_else(|e| panic!("{e:?}"));
            end.synchronize().unwrap_or_else(|e| panic!("{e:?}"));
            let ms = start.elapsed_ms(&end).unwrap_or_else(|e| panic!("{e:?}"));
            f64::from(ms) * 1e3 / launches as f64
        })
        .collect();
    us.sort_by(f64::total_cmp);
    us[us.len() / 2]
}

/// Input sets that together hold at least 256 MiB of K and V (four times the L2).
fn cold_sets(kv_bytes: usize) -> usize {
    (256usize << 20).div_ceil(kv_bytes).clamp(4, 1024)
}

/// A kernel that only reads K and V (16-byte loads over the whole grid): what reading
/// the same bytes costs, launch included.
fn read_only(words: usize) -> Kernel {
    let source = format!(
        r#"extern "C" __global__ void __launch_bounds__(256) kv_read(const uint4* __restrict__ k, const uint4* __restrict__ v, unsigned* __restrict__ out) {{
    unsigned acc = 0;
    for (long long x = blockIdx.x * 256LL + threadIdx.x; x < {words}LL; x += (long long)gridDim.x * 256) {{
        const uint4 a = k[x], b = v[x];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    }}
    if (acc == 0x9e3779b9u) out[0] = acc;
}}
"#
    );
    let grid = words.div_ceil(256).min(4 * 132);
    Kernel {
        name: "kv_read".into(),
        node: "kv_read".into(),
        source,
        threads: grid * 256,
        vectorized: true,
        inputs: vec![0, 1],
        outputs: vec![2],
        shared_mem: 0,
        grid: grid as u32,
        block: 256,
        index_check: None,
    }
}

/// Decode timings: 32 query heads over 4 KV heads of 64, one query row, as a plan runs
/// the kernel (replayed from a CUDA graph, K and V read from memory), with the same
/// launches warm in L2 and a kernel that only reads K and V for comparison. GB/s counts
/// the bytes of K and V.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu-check.sh runs it on the GPU machine"]
fn decode_attention_timing() {
    let dev = Device::open().unwrap_or_else(|e| panic!("{e}"));
    println!("| case | grid x block | µs | GB/s | µs in L2 | read-only µs, GB/s |");
    println!("|---|---|---:|---:|---:|---:|");
    let mut measured = BTreeMap::new();
    for (batch, skv, dt) in [
        (1, 128, DType::BF16),
        (1, 1000, DType::BF16),
        (1, 4096, DType::BF16),
        (1, 8192, DType::BF16),
        (8, 4096, DType::BF16),
        (1, 4096, DType::F16),
        (1, 4096, DType::F32),
    ] {
        let c = Case {
            dt,
            batch,
            skv,
            ..cases(dt)[0]
        };
        let k = c.kernel(&c.graph());
        let [qs, kvs] = c.shapes();
        let ins = [(dt, qs.clone()), (dt, kvs.clone()), (dt, kvs.clone())];
        let bytes = 2 * kvs.iter().product::<usize>() * esize(dt);
        let sets = cold_sets(bytes);
        let cold = graph_us(&dev, &k, &ins, (dt, &qs), sets, sets);
        let warm = graph_us(&dev, &k, &ins, (dt, &qs), 1, 64);
        let half = (DType::U32, vec![bytes / 8]);
        let read = graph_us(
            &dev,
            &read_only(bytes / 32),
            &[half.clone(), half],
            (DType::U32, &[1]),
            sets,
            sets,
        );
        let gbs = |us: f64| bytes as f64 / (us * 1e-6) / 1e9;
        println!(
            "| {dt} B={batch} Skv={skv} | {} x {} | {cold:.2} | {:.0} | {warm:.2} | {read:.2}, {:.0} |",
            k.grid,
            k.block,
            gbs(cold),
            gbs(read)
        );
        measured.insert((batch, skv, dt), (cold, gbs(cold)));
    }
    // Batch 1 is held to its latency, not to a bandwidth: one KV head's keys split over
    // at most 8 blocks (a portable cluster), so 4 KV heads keep 32 of the 132
    // multiprocessors busy, and even a kernel that only reads those 4 MiB of K and V, on
    // all of them, reaches about 1.7 TB/s. Batch 8 reads 32 MiB over 128 blocks.
    let (us, _) = measured[&(1, 128, DType::BF16)];
    assert!(us <= 5.0, "bf16 B=1 Skv=128: {us:.2} µs (at most 5)");
    let (_, gbs) = measured[&(8, 4096, DType::BF16)];
    assert!(
        gbs >= 1500.0,
        "bf16 B=8 Skv=4096: {gbs:.0} GB/s (at least 1500)"
    );
}
