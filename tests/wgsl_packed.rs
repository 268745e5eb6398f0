//! The WGSL MatMulNBits shader (codegen/src/wgsl/packed.rs) on one-node graphs against
//! the CPU interpreter, on a real wgpu adapter (CI: Mesa's lavapipe; no adapter fails,
//! never skips). Weights are random quantized values packed with `nbits::pack`, zero
//! points with `nbits::pack_zero_points`; A is fed at run time. The cases cover what the
//! shader specializes on: 4 and 8 bits, every zero-point form (default, packed u8,
//! float), bias or none, K a multiple of the block and not (K = 48 in blocks of 32,
//! K = 160 in blocks of 64, K = 20 in blocks of 16: a run of 8 cut by K), M = 1, 3, 20
//! (one partial row tile, several) and N = 5, 70 (partial column tiles), in f32 and,
//! where the adapter has SHADER_F16, f16. An element matches when
//! `|got − want| ≤ tol · (|want| + rms(want))`, tol 1e-4 for f32 and 1e-2 for f16
//! (one f16 rounding of the output on each side): the RMS term keeps an output that
//! cancels to near zero from asking more than f32 sums of K products give. Every
//! shader variant is also validated by naga without running; a weight above the
//! binding limit is split into pieces that still match; and a float model compiled
//! with `--quantize int4` runs its products as these shaders, matching the CPU run of
//! the same quantized model.

use gopt::codegen::wgsl::{emit_kernels, WgslKernel};
use gopt::ir::ops::nn::nbits::ZeroPoints;
use gopt::ir::ops::{NnOp, ShapeOp};
use gopt::ir::{Attrs, DType, Graph, Op, Tensor, TensorType};
use gopt::pipeline::{specialize, Backend, Options};
use gopt::runtime::wgpu::WgpuDevice;
use std::collections::BTreeMap;

mod common;
use common::packed::Product;
use common::{node_inputs, random, reference};

const ZEROS: [ZeroPoints; 3] = [ZeroPoints::Default, ZeroPoints::Packed, ZeroPoints::Float];

/// One MatMulNBits graph.
#[derive(Clone, Debug)]
struct Case {
    dt: DType,
    bits: usize,
    zero: ZeroPoints,
    bias: bool,
    k: usize,
    block: usize,
    /// A's dims but the last.
    lead: Vec<usize>,
    n: usize,
}

impl Case {
    fn product(&self) -> Product {
        let mut a_shape = self.lead.clone();
        a_shape.push(self.k);
        Product {
            dt: self.dt,
            a_shape,
            n: self.n,
            bits: self.bits,
            block: self.block,
            zero: self.zero,
            bias: self.bias,
        }
    }

    /// The one-node graph, its constants drawn from `seed` (tests/common/packed.rs).
    fn graph(&self, seed: u64) -> gopt::ir::Verified {
        gopt::ir::verify(self.product().graph(seed)).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn kernel(g: &gopt::ir::Verified, what: &str) -> WgslKernel {
    let (mut ks, others) = emit_kernels(g).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(others.is_empty(), "{what}: no shader for {others:?}");
    assert_eq!(ks.len(), 1, "{what}");
    ks.remove(0)
}

/// Checks `got` against `want` with the header's tolerance.
fn matches(got: &Tensor, want: &Tensor, tol: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{}{:?} against {}{:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let rms = (w.iter().map(|v| v * v).sum::<f64>() / w.len().max(1) as f64).sqrt();
    for (i, (x, y)) in g.iter().zip(&w).enumerate() {
        // NaN on either side fails.
        let ok = (x - y).abs() <= tol * (y.abs() + rms);
        if !ok {
            return Err(format!("element {i}: GPU {x}, CPU {y} (rms {rms})"));
        }
    }
    Ok(())
}

/// Every combination of bits, zero points, bias and K for f32 (f16: of bits, zero
/// points and bias), rotating the (M, N) pairs through them.
fn cases(dt: DType) -> Vec<Case> {
    let shapes = [
        (vec![1], 5),
        (vec![3], 70),
        (vec![20], 5),
        (vec![1], 70),
        (vec![3], 5),
        (vec![4, 5], 70),
    ];
    let blocks = [(48, 32), (160, 64)];
    let mut v = Vec::new();
    for bits in [4, 8] {
        for zero in ZEROS {
            for bias in [false, true] {
                // f16 (a second rounding on each side, not a second shader shape) takes
                // one K each, alternating.
                let ks = match dt {
                    DType::F16 => &blocks[v.len() % 2..v.len() % 2 + 1],
                    _ => &blocks[..],
                };
                for &(k, block) in ks {
                    let (lead, n) = shapes[v.len() % shapes.len()].clone();
                    v.push(Case {
                        dt,
                        bits,
                        zero,
                        bias,
                        k,
                        block,
                        lead,
                        n,
                    });
                }
            }
        }
    }
    // K = 20 in blocks of 16: the last run of 8 is cut by K.
    for (bits, zero) in [(4, ZeroPoints::Packed), (8, ZeroPoints::Float)] {
        v.push(Case {
            dt,
            bits,
            zero,
            bias: true,
            k: 20,
            block: 16,
            lead: vec![3],
            n: 70,
        });
    }
    v
}

/// Runs [`cases`] of `dt` on the adapter (f16 only where it has SHADER_F16).
fn run_cases(dt: DType) {
    let dev = WgpuDevice::open(None).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "wgsl: adapter {} ({}), f16 {}",
        dev.adapter.name, dev.adapter.backend, dev.adapter.f16
    );
    if dt == DType::F16 && !dev.adapter.f16 {
        println!("{} has no SHADER_F16: no f16 cases", dev.adapter.name);
        return;
    }
    let all = cases(dt);
    let mut failures = Vec::new();
    for (i, c) in all.iter().enumerate() {
        let what = format!("{c:?}");
        let g = c.graph(i as u64 + 1);
        let k = kernel(&g, &what);
        let node = &g.nodes[0];
        let values = node_inputs(&g, node, 100 + i as u64);
        let want = reference(node, &values);
        let params: Vec<&Tensor> = k.inputs.iter().map(|v| &values[v]).collect();
        let out = (c.dt, want[0].shape().to_vec());
        let got = dev
            .run_kernel(&k, &params, &[out])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let tol = if dt == DType::F16 { 1e-2 } else { 1e-4 };
        if let Err(e) = matches(&got[0], &want[0], tol) {
            failures.push(format!("{what}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{} {dt} MatMulNBits shaders match", all.len());
}

#[test]
fn f32_packed_products_match_the_interpreter() {
    run_cases(DType::F32);
}

#[test]
fn f16_packed_products_match_the_interpreter() {
    run_cases(DType::F16);
}

#[test]
fn every_shader_variant_validates() {
    // `emit_kernels` parses and validates every shader with naga; the row counts take
    // each row-tile height from 1 to the most (8) and several tiles.
    let mut n = 0;
    for dt in [DType::F32, DType::F16] {
        for bits in [4, 8] {
            for zero in ZEROS {
                for bias in [false, true] {
                    for m in [1, 3, 8, 20] {
                        let c = Case {
                            dt,
                            bits,
                            zero,
                            bias,
                            k: 160,
                            block: 64,
                            lead: vec![m],
                            n: 70,
                        };
                        let k = kernel(&c.graph(7), &format!("{c:?}"));
                        assert_eq!(
                            k.inputs.len(),
                            3 + usize::from(bias) + usize::from(zero != ZeroPoints::Default)
                        );
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 96);
}

#[test]
fn a_packed_weight_above_the_binding_limit_is_split_and_matches() {
    let c = Case {
        dt: DType::F32,
        bits: 4,
        zero: ZeroPoints::Packed,
        bias: true,
        k: 160,
        block: 32,
        lead: vec![3],
        n: 300,
    };
    let g = c.graph(11);
    let m = gopt::Imported {
        model: gopt::Model {
            graph: g.into_inner(),
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 21), ("com.microsoft".into(), 1)],
        ir_version: 10,
        producer: "wgsl_packed".into(),
        source: None,
    };
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    // B takes 300 · 5 · 16 words = 96,000 bytes in WGSL storage: cut under 32 KiB.
    let opts = Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16)
        .wgsl_max_binding(32 << 10);
    let v = specialize(&m.model, &BTreeMap::new(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let pieces = |op: Op| v.graph.nodes.iter().filter(|n| n.op == op).count();
    assert_eq!(pieces(Op::Shape(ShapeOp::Concat)), 1, "one join");
    assert!(pieces(Op::Nn(NnOp::MatMulNBits)) >= 4, "B cut in 4 or more");
    let x = random(DType::F32, &[3, 160], 12);
    let want = gopt::run_cpu(&m, std::slice::from_ref(&x)).expect("interpreter");
    let mut compiled = gopt::compile(&m, &opts).unwrap_or_else(|e| panic!("compile: {e}"));
    let got = compiled.run(&[x]).unwrap_or_else(|e| panic!("wgpu: {e}"));
    matches(&got[0], &want[0], 1e-4).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_model_quantized_to_int4_runs_packed_on_wgpu() {
    use gopt::passes::quantize::{Quantize, Scheme};
    // x[3, 64] · W1[64, 96] → Relu → · W2[96, 40]: W1 quantized in groups of 32, W2 (it
    // computes the output, like an LM head) kept in float by --quantize.
    let mut g = Graph::new("mlp");
    let ty = TensorType::new(DType::F32, gopt::ir::dim::shape_of(&[3, 64]));
    let x = g.add_input("x", ty);
    let w1 = g.add_const("w1", random(DType::F32, &[64, 96], 21));
    let w2 = g.add_const("w2", random(DType::F32, &[96, 40], 22));
    let add = |g: &mut Graph, name: &str, op: Op, ins: Vec<_>| {
        let id = g.add_node(name, op, Attrs::default(), ins, &[name]);
        g.nodes[id.index()].outputs[0]
    };
    let h = add(&mut g, "mm1", Op::Nn(NnOp::MatMul), vec![Some(x), Some(w1)]);
    let h = add(
        &mut g,
        "relu",
        Op::Elementwise(gopt::ir::ops::ElementwiseOp::Relu),
        vec![Some(h)],
    );
    let y = add(&mut g, "mm2", Op::Nn(NnOp::MatMul), vec![Some(h), Some(w2)]);
    g.outputs = vec![y];
    let m = gopt::Imported {
        model: gopt::Model {
            graph: gopt::ir::verify(g).expect("verifies").into_inner(),
            meta: Default::default(),
        },
        opsets: vec![(String::new(), 21)],
        ir_version: 10,
        producer: "wgsl_packed".into(),
        source: None,
    };
    let q = Quantize {
        group: 32,
        ..Quantize::new(Scheme::Int4)
    };
    let dev = gopt::wgpu::device(None).unwrap_or_else(|e| panic!("{e}"));
    let wgpu = Options::new()
        .backend(Backend::Wgpu)
        .wgsl_f16(dev.adapter.f16)
        .quantize(q);
    let cpu = Options::default().quantize(q);
    let x = random(DType::F32, &[3, 64], 23);
    let mut c = gopt::compile(&m, &wgpu).unwrap_or_else(|e| panic!("compile: {e}"));
    let kinds = c.buckets()[0].kernel_kinds().unwrap_or_default();
    assert_eq!(kinds.get("matmulnbits"), Some(&1), "{kinds:?}");
    let got = c.run(std::slice::from_ref(&x)).expect("wgpu run");
    let mut c = gopt::compile(&m, &cpu).unwrap_or_else(|e| panic!("compile: {e}"));
    let want = c.run(std::slice::from_ref(&x)).expect("cpu run");
    matches(&got[0], &want[0], 1e-4).unwrap_or_else(|e| panic!("{e}"));
}
