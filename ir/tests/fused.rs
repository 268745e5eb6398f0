//! The fused family against the compositions of primitive ops they stand for, both run
//! through the interpreter: FusedMatMul (every activation, alpha, trans_b, batched and
//! 1-D products, bias and residual broadcasting), FusedConv (depthwise and dense, stride
//! 2 / pad 1, NCHW and NHWC, every activation), FusedElementwise (a body of element-wise
//! ops). f32/f64 must agree to rtol 1e-5; f16/bf16 (computed in f32, rounded once) must
//! be within a relative L2 error of 1e-2 of the f32 composition. Every graph also goes
//! through print → parse → print and shape inference, whose type must match the
//! result's. Errors (bad activation, dtype mismatch, arity) are errors, not panics.

use gopt_ir::text::{parse, print};
use gopt_ir::{infer_types, interp, DType, Graph, Op, Tensor};

// ---------------------------------------------------------------- helpers

/// Deterministic pseudo-random values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn tensor(dt: DType, shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f64s(dt, shape, &data(n, seed)).expect("shape matches")
}

fn fmt_ty(dt: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{dt}[{}]", dims.join(","))
}

/// Builds a graph in the text format, value by value.
#[derive(Default)]
struct Text {
    inputs: Vec<String>,
    lines: Vec<String>,
    next: usize,
}

impl Text {
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%{}", self.next - 1)
    }

    fn input(&mut self, dt: DType, shape: &[usize]) -> String {
        self.input_ty(&fmt_ty(dt, shape))
    }

    fn input_ty(&mut self, ty: &str) -> String {
        let v = self.fresh();
        self.inputs
            .push(format!("{v} \"in{}\": {ty}", self.inputs.len()));
        v
    }

    /// A scalar constant.
    fn scalar(&mut self, dt: DType, v: f64) -> String {
        let id = self.fresh();
        self.lines
            .push(format!("{id} \"c{}\": {dt}[] = const [{v:?}]", self.next));
        id
    }

    /// A node with one output (`args`: value ids or `_`), untyped unless `ty` is given.
    fn node_ty(&mut self, op: &str, args: &[&str], attrs: &str, ty: Option<&str>) -> String {
        let id = self.fresh();
        let ty = ty.map(|t| format!(": {t}")).unwrap_or_default();
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(" {{{attrs}}}")
        };
        self.lines.push(format!(
            "{id} \"v{}\"{ty} = {op} \"n{}\"({}){attrs}",
            self.next,
            self.next,
            args.join(", ")
        ));
        id
    }

    fn node(&mut self, op: &str, args: &[&str], attrs: &str) -> String {
        self.node_ty(op, args, attrs, None)
    }

    fn finish(&self, name: &str, out: &str) -> String {
        let mut s = format!(
            "graph \"{name}\"({}) -> ({out}) {{\n",
            self.inputs.join(", ")
        );
        for l in &self.lines {
            s.push_str("  ");
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("}\n");
        s
    }
}

/// Parses `src`, checks print → parse → print is a fixpoint, runs it, and checks that
/// inference gives the result's dtype and shape.
fn run(src: &str, inputs: &[Tensor]) -> Tensor {
    let g = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    round_trips(&g);
    let out = interp::run(&g, inputs).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mut typed = g.clone();
    infer_types(&mut typed).unwrap_or_else(|e| panic!("inference: {e}\n{src}"));
    let ty = typed.ty(typed.outputs[0]).expect("typed output");
    assert_eq!(ty.dtype, out[0].dtype(), "inferred dtype\n{src}");
    let dims: Vec<Option<u64>> = ty.shape.iter().map(|d| d.known()).collect();
    let want: Vec<Option<u64>> = out[0].shape().iter().map(|&d| Some(d as u64)).collect();
    assert_eq!(dims, want, "inferred shape\n{src}");
    out.into_iter().next().expect("one output")
}

#[track_caller]
fn round_trips(g: &Graph) {
    let text = print(g);
    let again = print(&parse(&text).unwrap_or_else(|e| panic!("reparse: {e}\n{text}")));
    assert_eq!(text, again);
}

/// Element-wise `|got - want| <= rtol * (1 + |want|)`, same shape.
#[track_caller]
fn assert_close(got: &Tensor, want: &Tensor, rtol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (i, (a, b)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
        assert!(
            (a - b).abs() <= rtol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: got {a}, want {b}"
        );
    }
}

/// `||got - want|| / ||want|| <= tol`, same shape.
#[track_caller]
fn assert_l2(got: &Tensor, want: &Tensor, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let err: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = w.iter().map(|b| b * b).sum();
    let rel = (err / norm.max(1e-30)).sqrt();
    assert!(rel <= tol, "{what}: relative L2 error {rel} > {tol}");
}

/// Appends the primitive ops of activation `act` applied to `x`.
fn activation(t: &mut Text, act: &str, x: &str, dt: DType, clip: (f64, f64)) -> String {
    match act {
        "none" => x.to_string(),
        "relu" => t.node("Relu", &[x], ""),
        "gelu" => t.node("Gelu", &[x], ""),
        "gelu_tanh" => t.node("Gelu", &[x], "approximate=\"tanh\""),
        "silu" => {
            let s = t.node("Sigmoid", &[x], "");
            t.node("Mul", &[x, &s], "")
        }
        "tanh" => t.node("Tanh", &[x], ""),
        "sigmoid" => t.node("Sigmoid", &[x], ""),
        "clip" => {
            let lo = t.scalar(dt, clip.0);
            let hi = t.scalar(dt, clip.1);
            t.node("Clip", &[x, &lo, &hi], "")
        }
        other => panic!("no composition for {other}"),
    }
}

/// Rounds through `dt` and back to f32, so that a low-precision run and its f32
/// reference see the same values.
fn as_dtype(t: &Tensor, dt: DType) -> (Tensor, Tensor) {
    let low = t.cast(dt);
    let f32v = low.cast(DType::F32);
    (low, f32v)
}

// ---------------------------------------------------------------- FusedMatMul

const MM_ACTS: [&str; 7] = [
    "none",
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "tanh",
    "sigmoid",
];

#[derive(Clone)]
struct MatMulCase {
    a: Vec<usize>,
    b: Vec<usize>,
    bias: Option<Vec<usize>>,
    residual: Option<Vec<usize>>,
    act: &'static str,
    alpha: f64,
    trans_b: bool,
}

impl MatMulCase {
    fn new(a: &[usize], b: &[usize]) -> Self {
        MatMulCase {
            a: a.to_vec(),
            b: b.to_vec(),
            bias: None,
            residual: None,
            act: "none",
            alpha: 1.0,
            trans_b: false,
        }
    }

    fn attrs(&self, out_dtype: Option<DType>) -> String {
        let mut a = vec![format!("activation=\"{}\"", self.act)];
        if self.alpha != 1.0 {
            a.push(format!("alpha={:?}", self.alpha));
        }
        if self.trans_b {
            a.push("trans_b=1".into());
        }
        if let Some(d) = out_dtype {
            a.push(format!("output_dtype=dtype {d}"));
        }
        a.join(", ")
    }

    /// The inputs, in `dt` (bias and residual in `extra_dt`).
    fn inputs(&self, dt: DType, extra_dt: DType) -> Vec<Tensor> {
        let mut v = vec![tensor(dt, &self.a, 1), tensor(dt, &self.b, 2)];
        if let Some(s) = &self.bias {
            v.push(tensor(extra_dt, s, 3));
        }
        if let Some(s) = &self.residual {
            v.push(tensor(extra_dt, s, 4));
        }
        v
    }

    fn fused(&self, dt: DType, extra_dt: DType, out_dtype: Option<DType>) -> String {
        let mut t = Text::default();
        let a = t.input(dt, &self.a);
        let b = t.input(dt, &self.b);
        let bias = self.bias.as_ref().map(|s| t.input(extra_dt, s));
        let res = self.residual.as_ref().map(|s| t.input(extra_dt, s));
        let mut args = vec![a, b];
        match (&bias, &res) {
            (None, None) => {}
            (Some(x), None) => args.push(x.clone()),
            (x, Some(r)) => {
                args.push(x.clone().unwrap_or_else(|| "_".into()));
                args.push(r.clone());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let y = t.node("FusedMatMul", &args, &self.attrs(out_dtype));
        t.finish("fused", &y)
    }

    /// The composition in f32: [Transpose] MatMul [Mul alpha] [Add bias] act [Add res].
    fn reference(&self) -> String {
        let dt = DType::F32;
        let mut t = Text::default();
        let a = t.input(dt, &self.a);
        let mut b = t.input(dt, &self.b);
        let bias = self.bias.as_ref().map(|s| t.input(dt, s));
        let res = self.residual.as_ref().map(|s| t.input(dt, s));
        if self.trans_b {
            let r = self.b.len();
            let mut perm: Vec<String> = (0..r).map(|i| i.to_string()).collect();
            perm.swap(r - 2, r - 1);
            b = t.node(
                "Transpose",
                &[&b],
                &format!("perm=ints[{}]", perm.join(",")),
            );
        }
        let mut y = t.node("MatMul", &[&a, &b], "");
        if self.alpha != 1.0 {
            let k = t.scalar(dt, self.alpha);
            y = t.node("Mul", &[&y, &k], "");
        }
        if let Some(bias) = &bias {
            y = t.node("Add", &[&y, bias], "");
        }
        y = activation(&mut t, self.act, &y, dt, (0.0, 0.0));
        if let Some(r) = &res {
            y = t.node("Add", &[&y, r], "");
        }
        t.finish("reference", &y)
    }

    /// f32 (or f64) fused against the f32 (f64) composition, rtol 1e-5.
    fn check_exact(&self, dt: DType) {
        let ins = self.inputs(dt, dt);
        let got = run(&self.fused(dt, dt, None), &ins);
        // The composition in the same dtype (the reference is written in f32).
        let src = self.reference().replace("f32[", &format!("{dt}["));
        let want = run(&src, &ins);
        assert_eq!(got.dtype(), dt);
        assert_close(&got, &want, 1e-5, &format!("{dt} {}", self.describe()));
    }

    /// f16/bf16 fused against the f32 composition on the same (rounded) values.
    fn check_low(&self, dt: DType) {
        let ins = self.inputs(DType::F32, DType::F32);
        let (low, f32v): (Vec<Tensor>, Vec<Tensor>) = ins.iter().map(|t| as_dtype(t, dt)).unzip();
        let got = run(&self.fused(dt, dt, None), &low);
        assert_eq!(got.dtype(), dt);
        let want = run(&self.reference(), &f32v);
        assert_l2(&got, &want, 1e-2, &format!("{dt} {}", self.describe()));
    }

    fn describe(&self) -> String {
        format!(
            "A{:?} B{:?} bias {:?} residual {:?} act {} alpha {} trans_b {}",
            self.a, self.b, self.bias, self.residual, self.act, self.alpha, self.trans_b
        )
    }
}

/// Every activation, with and without bias and residual, alpha 1 and 0.5.
fn variants(base: &MatMulCase, bias: &[usize], residual: &[usize]) -> Vec<MatMulCase> {
    let mut out = Vec::new();
    for act in MM_ACTS {
        for (with_b, with_r) in [(false, false), (true, false), (false, true), (true, true)] {
            for alpha in [1.0, 0.5] {
                let mut c = base.clone();
                c.act = act;
                c.alpha = alpha;
                c.bias = with_b.then(|| bias.to_vec());
                c.residual = with_r.then(|| residual.to_vec());
                out.push(c);
            }
        }
    }
    out
}

#[test]
fn fused_matmul_f32_every_activation_awkward_sizes() {
    let base = MatMulCase::new(&[3, 50], &[50, 783]);
    for c in variants(&base, &[783], &[3, 783]) {
        c.check_exact(DType::F32);
    }
}

#[test]
fn fused_matmul_low_precision_every_activation() {
    let base = MatMulCase::new(&[3, 50], &[50, 783]);
    for c in variants(&base, &[783], &[3, 783]) {
        c.check_low(DType::BF16);
        c.check_low(DType::F16);
    }
}

#[test]
fn fused_matmul_batched_broadcast_and_trans_b() {
    let mut cases = Vec::new();
    // Batch dims broadcast: [2,3,5,7] x [3,7,4].
    let batched = MatMulCase::new(&[2, 3, 5, 7], &[3, 7, 4]);
    cases.extend(variants(&batched, &[4], &[2, 3, 5, 4]));
    // B transposed over its last two axes, 2-D and batched.
    let mut t2 = MatMulCase::new(&[3, 50], &[783, 50]);
    t2.trans_b = true;
    cases.extend(variants(&t2, &[783], &[3, 783]));
    let mut t3 = MatMulCase::new(&[2, 3, 9], &[2, 17, 9]);
    t3.trans_b = true;
    cases.extend(variants(&t3, &[17], &[2, 3, 17]));
    for c in &cases {
        c.check_exact(DType::F32);
    }
    for c in cases.iter().step_by(5) {
        c.check_low(DType::BF16);
        c.check_exact(DType::F64);
    }
}

#[test]
fn fused_matmul_one_d_operands() {
    // [7] x [7, 5] -> [5]; [2, 3, 7] x [7] -> [2, 3].
    for c in [
        {
            let mut c = MatMulCase::new(&[7], &[7, 5]);
            c.bias = Some(vec![5]);
            c.residual = Some(vec![5]);
            c.act = "gelu";
            c
        },
        {
            let mut c = MatMulCase::new(&[2, 3, 7], &[7]);
            c.bias = Some(vec![3]);
            c.residual = Some(vec![2, 3]);
            c.act = "silu";
            c
        },
    ] {
        c.check_exact(DType::F32);
        c.check_low(DType::F16);
    }
}

#[test]
fn fused_matmul_bias_and_residual_broadcast_multidirectionally() {
    // A per-row bias [3, 1], and a residual that adds a leading dim: [2, 3, 783].
    let mut c = MatMulCase::new(&[3, 50], &[50, 783]);
    c.bias = Some(vec![3, 1]);
    c.residual = Some(vec![2, 3, 783]);
    c.act = "tanh";
    c.check_exact(DType::F32);
    let out = run(
        &c.fused(DType::F32, DType::F32, None),
        &c.inputs(DType::F32, DType::F32),
    );
    assert_eq!(out.shape(), &[2, 3, 783]);
}

#[test]
fn fused_matmul_mixed_dtypes_and_output_dtype() {
    // bf16 operands, f32 bias and residual, f32 output: the f32 accumulator is stored
    // without the bf16 rounding, so it matches the f32 composition to rtol 1e-5.
    let mut c = MatMulCase::new(&[4, 33], &[33, 65]);
    c.bias = Some(vec![65]);
    c.residual = Some(vec![4, 65]);
    c.act = "relu";
    let ins = c.inputs(DType::F32, DType::F32);
    let (mut low, f32v): (Vec<Tensor>, Vec<Tensor>) =
        ins.iter().map(|t| as_dtype(t, DType::BF16)).unzip();
    low[2] = f32v[2].clone();
    low[3] = f32v[3].clone();
    let got = run(&c.fused(DType::BF16, DType::F32, Some(DType::F32)), &low);
    assert_eq!(got.dtype(), DType::F32);
    let want = run(&c.reference(), &f32v);
    assert_close(&got, &want, 1e-5, "bf16 -> f32 output");
    // f16 operands, output_dtype bf16.
    let (low, f32v): (Vec<Tensor>, Vec<Tensor>) =
        ins.iter().map(|t| as_dtype(t, DType::F16)).unzip();
    let got = run(&c.fused(DType::F16, DType::F16, Some(DType::BF16)), &low);
    assert_eq!(got.dtype(), DType::BF16);
    assert_l2(
        &got,
        &run(&c.reference(), &f32v),
        1e-2,
        "f16 -> bf16 output",
    );
}

// ---------------------------------------------------------------- FusedConv

const CONV_ACTS: [&str; 5] = ["none", "relu", "clip", "silu", "sigmoid"];

#[derive(Clone)]
struct ConvCase {
    /// NCHW input shape.
    x: [usize; 4],
    /// Output channels.
    m: usize,
    kernel: [usize; 2],
    group: usize,
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
    bias: bool,
    residual: bool,
    act: &'static str,
    nhwc: bool,
}

impl ConvCase {
    fn w_shape(&self) -> Vec<usize> {
        vec![
            self.m,
            self.x[1] / self.group,
            self.kernel[0],
            self.kernel[1],
        ]
    }

    fn out_hw(&self) -> [usize; 2] {
        let f = |i: usize| {
            let span = self.dilations[i] * (self.kernel[i] - 1) + 1;
            (self.x[2 + i] + self.pads[i] + self.pads[2 + i] - span) / self.strides[i] + 1
        };
        [f(0), f(1)]
    }

    /// X's shape in the case's layout.
    fn x_shape(&self) -> Vec<usize> {
        let [n, c, h, w] = self.x;
        if self.nhwc {
            vec![n, h, w, c]
        } else {
            vec![n, c, h, w]
        }
    }

    /// Y's (and the residual's) shape in the case's layout.
    fn y_shape(&self) -> Vec<usize> {
        let [oh, ow] = self.out_hw();
        if self.nhwc {
            vec![self.x[0], oh, ow, self.m]
        } else {
            vec![self.x[0], self.m, oh, ow]
        }
    }

    fn conv_attrs(&self) -> String {
        let j = |v: &[usize]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "dilations=ints[{}], group={}, kernel_shape=ints[{}], pads=ints[{}], strides=ints[{}]",
            j(&self.dilations),
            self.group,
            j(&self.kernel),
            j(&self.pads),
            j(&self.strides)
        )
    }

    fn inputs(&self, dt: DType) -> Vec<Tensor> {
        let mut v = vec![
            tensor(dt, &self.x_shape(), 11),
            tensor(dt, &self.w_shape(), 12),
        ];
        if self.bias {
            v.push(tensor(dt, &[self.m], 13));
        }
        if self.residual {
            v.push(tensor(dt, &self.y_shape(), 14));
        }
        v
    }

    fn fused(&self, dt: DType) -> String {
        let mut t = Text::default();
        let x = t.input(dt, &self.x_shape());
        let w = t.input(dt, &self.w_shape());
        let mut args = vec![x, w];
        if self.bias || self.residual {
            args.push(if self.bias {
                t.input(dt, &[self.m])
            } else {
                "_".into()
            });
        }
        if self.residual {
            args.push(t.input(dt, &self.y_shape()));
        }
        let mut attrs = format!("activation=\"{}\", {}", self.act, self.conv_attrs());
        if self.act == "clip" {
            attrs.push_str(", clip_max=6.0, clip_min=0.0");
        }
        if self.nhwc {
            attrs.push_str(", layout=\"NHWC\"");
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let y = t.node("FusedConv", &args, &attrs);
        t.finish("fused", &y)
    }

    /// In f32: [Transpose] Conv(X, W, B) [Transpose] act [Add residual].
    fn reference(&self) -> String {
        let dt = DType::F32;
        let mut t = Text::default();
        let mut x = t.input(dt, &self.x_shape());
        let w = t.input(dt, &self.w_shape());
        let b = self.bias.then(|| t.input(dt, &[self.m]));
        let r = self.residual.then(|| t.input(dt, &self.y_shape()));
        if self.nhwc {
            x = t.node("Transpose", &[&x], "perm=ints[0,3,1,2]");
        }
        let mut args = vec![x.as_str(), w.as_str()];
        if let Some(b) = &b {
            args.push(b);
        }
        let mut y = t.node("Conv", &args, &self.conv_attrs());
        if self.nhwc {
            y = t.node("Transpose", &[&y], "perm=ints[0,2,3,1]");
        }
        y = activation(&mut t, self.act, &y, dt, (0.0, 6.0));
        if let Some(r) = &r {
            y = t.node("Add", &[&y, r], "");
        }
        t.finish("reference", &y)
    }

    fn check(&self, dt: DType) {
        let what = format!(
            "{dt} x{:?} m{} group {} act {} bias {} residual {} nhwc {}",
            self.x, self.m, self.group, self.act, self.bias, self.residual, self.nhwc
        );
        let ins = self.inputs(DType::F32);
        let (low, f32v): (Vec<Tensor>, Vec<Tensor>) = ins.iter().map(|t| as_dtype(t, dt)).unzip();
        let got = run(&self.fused(dt), &low);
        assert_eq!(got.dtype(), dt, "{what}");
        assert_eq!(got.shape(), self.y_shape().as_slice(), "{what}");
        let want = run(&self.reference(), &f32v);
        if dt == DType::F32 {
            assert_close(&got, &want, 1e-5, &what);
        } else {
            assert_l2(&got, &want, 1e-2, &what);
        }
    }
}

/// Depthwise (group = channels) and dense (group 1) 3x3 convolutions, stride 2, pad 1,
/// at odd spatial sizes, in both layouts, every activation, with and without bias and
/// residual.
fn conv_cases() -> Vec<ConvCase> {
    let mut out = Vec::new();
    for (m, group) in [(6, 6), (5, 1)] {
        for nhwc in [false, true] {
            for act in CONV_ACTS {
                for (bias, residual) in [(false, false), (true, false), (false, true), (true, true)]
                {
                    out.push(ConvCase {
                        x: [2, 6, 9, 11],
                        m,
                        kernel: [3, 3],
                        group,
                        strides: [2, 2],
                        pads: [1, 1, 1, 1],
                        dilations: [1, 1],
                        bias,
                        residual,
                        act,
                        nhwc,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn fused_conv_f32_depthwise_and_dense_both_layouts() {
    for c in conv_cases() {
        c.check(DType::F32);
    }
}

#[test]
fn fused_conv_low_precision() {
    for c in conv_cases() {
        c.check(DType::BF16);
        c.check(DType::F16);
    }
}

#[test]
fn fused_conv_other_geometries() {
    let base = ConvCase {
        x: [1, 4, 13, 10],
        m: 8,
        kernel: [3, 2],
        group: 2,
        strides: [1, 2],
        pads: [2, 0, 1, 1],
        dilations: [2, 1],
        bias: true,
        residual: true,
        act: "silu",
        nhwc: false,
    };
    // Grouped with a channel multiplier, dilation, asymmetric pads; pointwise.
    let pointwise = ConvCase {
        kernel: [1, 1],
        group: 1,
        strides: [1, 1],
        pads: [0, 0, 0, 0],
        dilations: [1, 1],
        act: "clip",
        ..base.clone()
    };
    let depth_mult = ConvCase {
        m: 8,
        group: 4,
        act: "relu",
        nhwc: true,
        ..base.clone()
    };
    for c in [
        base.clone(),
        ConvCase { nhwc: true, ..base },
        pointwise,
        depth_mult,
    ] {
        c.check(DType::F32);
        c.check(DType::BF16);
    }
}

// ---------------------------------------------------------------- FusedElementwise

/// A body `(a, b, c) -> Cast(Sigmoid((a * b + c) * 0.5), f16)` over the given input
/// types, and the same chain as primitive ops.
fn elementwise_graphs(types: [&str; 3], out_ty: &str) -> (String, String) {
    let chain = |t: &mut Text, a: &str, b: &str, c: &str, out_ty: Option<&str>| {
        let m = t.node("Mul", &[a, b], "");
        let s = t.node("Add", &[&m, c], "");
        let k = t.scalar(DType::F32, 0.5);
        let h = t.node("Mul", &[&s, &k], "");
        let g = t.node("Sigmoid", &[&h], "");
        t.node_ty("Cast", &[&g], "to=dtype f16", out_ty)
    };
    let mut body = Text::default();
    let (a, b, c) = (
        body.input_ty(types[0]),
        body.input_ty(types[1]),
        body.input_ty(types[2]),
    );
    let y = chain(&mut body, &a, &b, &c, Some(out_ty));
    let body = body.finish("body", &y);
    let mut f = Text::default();
    let ins: Vec<String> = types.iter().map(|t| f.input_ty(t)).collect();
    let args: Vec<&str> = ins.iter().map(String::as_str).collect();
    let y = f.node("FusedElementwise", &args, &format!("body={body}"));
    let fused = f.finish("fused", &y);
    let mut r = Text::default();
    let ins: Vec<String> = types.iter().map(|t| r.input_ty(t)).collect();
    let y = chain(&mut r, &ins[0], &ins[1], &ins[2], None);
    (fused, r.finish("reference", &y))
}

#[test]
fn fused_elementwise_matches_its_body_as_ops() {
    let (fused, reference) =
        elementwise_graphs(["f32[2,3,4]", "f32[4]", "f32[2,1,4]"], "f16[2,3,4]");
    let ins = vec![
        tensor(DType::F32, &[2, 3, 4], 21),
        tensor(DType::F32, &[4], 22),
        tensor(DType::F32, &[2, 1, 4], 23),
    ];
    let got = run(&fused, &ins);
    let want = run(&reference, &ins);
    assert_eq!(got.dtype(), DType::F16);
    assert_eq!(got.shape(), &[2, 3, 4]);
    assert_eq!(got.to_f64_vec(), want.to_f64_vec());
    // The graph attribute survives print -> parse -> print.
    let g = parse(&fused).expect("parses");
    let text = print(&g);
    assert!(
        text.contains("FusedElementwise") && text.contains("body=graph"),
        "{text}"
    );
    assert_eq!(text, print(&parse(&text).expect("reparses")));
}

#[test]
fn fused_elementwise_single_input_and_bool_intermediates() {
    // (x, y) -> Where(Greater(x, y), x, y * 2): broadcasting [3, 1] with [5].
    let mut body = Text::default();
    let x = body.input_ty("f32[3,1]");
    let y = body.input_ty("f32[5]");
    let gt = body.node("Greater", &[&x, &y], "");
    let two = body.scalar(DType::F32, 2.0);
    let y2 = body.node("Mul", &[&y, &two], "");
    let out = body.node_ty("Where", &[&gt, &x, &y2], "", Some("f32[3,5]"));
    let body = body.finish("body", &out);
    let mut f = Text::default();
    let (a, b) = (f.input_ty("f32[3,1]"), f.input_ty("f32[5]"));
    let o = f.node("FusedElementwise", &[&a, &b], &format!("body={body}"));
    let src = f.finish("fused", &o);
    let xs = tensor(DType::F32, &[3, 1], 31);
    let ys = tensor(DType::F32, &[5], 32);
    let got = run(&src, &[xs.clone(), ys.clone()]);
    let (xv, yv) = (xs.to_f64_vec(), ys.to_f64_vec());
    let want: Vec<f64> = (0..15)
        .map(|i| {
            let (x, y) = (xv[i / 5], yv[i % 5]);
            if x > y {
                x
            } else {
                (y as f32 * 2.0) as f64
            }
        })
        .collect();
    assert_eq!(got.shape(), &[3, 5]);
    assert_eq!(got.to_f64_vec(), want);

    // One input: Relu.
    let mut body = Text::default();
    let x = body.input_ty("f32[4]");
    let r = body.node_ty("Relu", &[&x], "", Some("f32[4]"));
    let body = body.finish("body", &r);
    let mut f = Text::default();
    let a = f.input_ty("f32[4]");
    let o = f.node("FusedElementwise", &[&a], &format!("body={body}"));
    let src = f.finish("fused", &o);
    let t = Tensor::from_f64s(DType::F32, &[4], &[-1.0, 0.5, -0.0, 2.0]).expect("tensor");
    assert_eq!(run(&src, &[t]).to_f64_vec(), vec![0.0, 0.5, 0.0, 2.0]);
}

#[test]
fn fused_elementwise_infers_symbolic_broadcast_and_body_dtype() {
    let (fused, _) = elementwise_graphs(
        ["f32[batch,1,4]", "f32[4]", "f32[seq,1]"],
        "f16[batch,seq,4]",
    );
    let mut g = parse(&fused).expect("parses");
    infer_types(&mut g).expect("infers");
    let ty = g.ty(g.outputs[0]).expect("typed");
    assert_eq!(ty.to_string(), "f16[batch,seq,4]");
}

// ---------------------------------------------------------------- inference

#[test]
fn fused_ops_infer_symbolic_shapes() {
    let src = r#"graph "g"(%0 "a": bf16[batch,seq,64], %1 "w": bf16[128,64], %2 "b": f32[128], %3 "x": f16[n,32,31,8], %4 "k": f16[16,8,3,3]) -> (%5, %6) {
  %5 "y" = FusedMatMul "mm"(%0, %1, %2) {activation="gelu", output_dtype=dtype f32, trans_b=1}
  %6 "z" = FusedConv "cv"(%3, %4) {activation="relu", layout="NHWC", pads=ints[1,1,1,1], strides=ints[2,2]}
}
"#;
    let mut g = parse(src).expect("parses");
    round_trips(&g);
    infer_types(&mut g).expect("infers");
    assert_eq!(
        g.ty(g.outputs[0]).unwrap().to_string(),
        "f32[batch,seq,128]"
    );
    assert_eq!(g.ty(g.outputs[1]).unwrap().to_string(), "f16[n,16,16,16]");
}

#[test]
fn fused_ops_are_internal_and_deterministic() {
    for name in ["FusedMatMul", "FusedConv", "FusedElementwise"] {
        let op = Op::from_name(name).expect("the text format knows it");
        assert!(op.is_internal() && op.is_deterministic());
        assert_eq!(op.name(), name);
        assert!(
            Op::from_onnx_name(name).is_none(),
            "{name} is not an ONNX op"
        );
        assert!(Op::all().contains(&op));
    }
    assert!(Op::from_onnx_name("MatMul").is_some());
}

// ---------------------------------------------------------------- errors

/// Runs `src` expecting both evaluation and inference to fail; returns both messages.
fn errors(src: &str, inputs: &[Tensor]) -> (String, String) {
    let g = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let eval = interp::run(&g, inputs)
        .map(|_| ())
        .expect_err("evaluation must fail")
        .to_string();
    let mut typed = g.clone();
    let infer = infer_types(&mut typed)
        .expect_err("inference must fail")
        .to_string();
    (eval, infer)
}

#[test]
fn bad_activation_names_are_errors() {
    let mm = r#"graph "g"(%0 "a": f32[2,3], %1 "b": f32[3,4]) -> (%2) {
  %2 "y" = FusedMatMul "mm"(%0, %1) {activation="swish"}
}
"#;
    let ins = [
        tensor(DType::F32, &[2, 3], 1),
        tensor(DType::F32, &[3, 4], 2),
    ];
    let (e, i) = errors(mm, &ins);
    for m in [e, i] {
        assert!(m.contains("activation") && m.contains("swish"), "{m}");
    }
    // Conv's list is its own: no gelu.
    let cv = r#"graph "g"(%0 "x": f32[1,2,5,5], %1 "w": f32[3,2,3,3]) -> (%2) {
  %2 "y" = FusedConv "cv"(%0, %1) {activation="gelu"}
}
"#;
    let ins = [
        tensor(DType::F32, &[1, 2, 5, 5], 1),
        tensor(DType::F32, &[3, 2, 3, 3], 2),
    ];
    let (e, i) = errors(cv, &ins);
    for m in [e, i] {
        assert!(m.contains("activation") && m.contains("gelu"), "{m}");
    }
    let layout = cv.replace("activation=\"gelu\"", "layout=\"NCWH\"");
    let (e, _) = errors(&layout, &ins);
    assert!(e.contains("layout"), "{e}");
}

#[test]
fn operand_dtype_mismatch_is_an_error() {
    let mm = r#"graph "g"(%0 "a": f32[2,3], %1 "b": f16[3,4]) -> (%2) {
  %2 "y" = FusedMatMul "mm"(%0, %1)
}
"#;
    let ins = [
        tensor(DType::F32, &[2, 3], 1),
        tensor(DType::F16, &[3, 4], 2),
    ];
    let (e, i) = errors(mm, &ins);
    for m in [e, i] {
        assert!(m.contains("f16") && m.contains("FusedMatMul"), "{m}");
    }
    // Integer operands are not supported either.
    let ints = mm
        .replace("f32[2,3]", "i32[2,3]")
        .replace("f16[3,4]", "i32[3,4]");
    let ins = [
        Tensor::from_f64s(DType::I32, &[2, 3], &[1.0; 6]).unwrap(),
        Tensor::from_f64s(DType::I32, &[3, 4], &[1.0; 12]).unwrap(),
    ];
    let (e, _) = errors(&ints, &ins);
    assert!(e.contains("float"), "{e}");
    // Conv: X f32, W bf16.
    let cv = r#"graph "g"(%0 "x": f32[1,2,5,5], %1 "w": bf16[3,2,3,3]) -> (%2) {
  %2 "y" = FusedConv "cv"(%0, %1)
}
"#;
    let ins = [
        tensor(DType::F32, &[1, 2, 5, 5], 1),
        tensor(DType::BF16, &[3, 2, 3, 3], 2),
    ];
    let (e, i) = errors(cv, &ins);
    for m in [e, i] {
        assert!(m.contains("bf16"), "{m}");
    }
}

#[test]
fn shape_and_arity_errors() {
    let ins = [
        tensor(DType::F32, &[2, 3], 1),
        tensor(DType::F32, &[3, 4], 2),
        tensor(DType::F32, &[4], 3),
    ];
    // Five inputs.
    let five = r#"graph "g"(%0 "a": f32[2,3], %1 "b": f32[3,4], %2 "c": f32[4]) -> (%3) {
  %3 "y" = FusedMatMul "mm"(%0, %1, %2, %2, %2)
}
"#;
    let (e, i) = errors(five, &ins);
    for m in [e, i] {
        assert!(m.contains("takes 2 to 4 inputs, got 5"), "{m}");
    }
    // Inner dims differ (trans_b makes B [4, 3]).
    let inner = r#"graph "g"(%0 "a": f32[2,3], %1 "b": f32[3,4]) -> (%2) {
  %2 "y" = FusedMatMul "mm"(%0, %1) {trans_b=1}
}
"#;
    let (e, i) = errors(inner, &ins[..2]);
    for m in [e, i] {
        assert!(m.contains("inner dims"), "{m}");
    }
    // A bias that does not broadcast.
    let bias = r#"graph "g"(%0 "a": f32[2,3], %1 "b": f32[3,4], %2 "c": f32[3]) -> (%3) {
  %3 "y" = FusedMatMul "mm"(%0, %1, %2)
}
"#;
    let ins3 = [ins[0].clone(), ins[1].clone(), tensor(DType::F32, &[3], 3)];
    let (e, i) = errors(bias, &ins3);
    for m in [e, i] {
        assert!(m.contains("broadcast"), "{m}");
    }
    // A conv residual of the wrong shape, and a bias of the wrong length.
    let cv = r#"graph "g"(%0 "x": f32[1,2,5,5], %1 "w": f32[3,2,3,3], %2 "r": f32[1,3,5,5]) -> (%3) {
  %3 "y" = FusedConv "cv"(%0, %1, _, %2)
}
"#;
    let cins = [
        tensor(DType::F32, &[1, 2, 5, 5], 1),
        tensor(DType::F32, &[3, 2, 3, 3], 2),
        tensor(DType::F32, &[1, 3, 5, 5], 3),
    ];
    let (e, i) = errors(cv, &cins);
    for m in [e, i] {
        assert!(m.contains("residual"), "{m}");
    }
    let cb = cv.replace("f32[1,3,5,5]", "f32[2]").replace("_, %2", "%2");
    let cins = [
        cins[0].clone(),
        cins[1].clone(),
        tensor(DType::F32, &[2], 3),
    ];
    let g = parse(&cb).expect("parses");
    let e = interp::run(&g, &cins).expect_err("bias length").to_string();
    assert!(e.contains("bias"), "{e}");
}

#[test]
fn fused_elementwise_arity_and_body_errors() {
    // The body takes two inputs, the node gives three.
    let src = r#"graph "g"(%0 "a": f32[4], %1 "b": f32[4], %2 "c": f32[4]) -> (%3) {
  %3 "y" = FusedElementwise "fe"(%0, %1, %2) {body=graph "body"(%0 "p": f32[4], %1 "q": f32[4]) -> (%2) {
    %2 "s": f32[4] = Add "add"(%0, %1)
  }}
}
"#;
    let ins = [
        tensor(DType::F32, &[4], 1),
        tensor(DType::F32, &[4], 2),
        tensor(DType::F32, &[4], 3),
    ];
    let (e, i) = errors(src, &ins);
    for m in [e, i] {
        assert!(m.contains("takes 2 inputs but the node has 3"), "{m}");
    }
    // A non-element-wise op in the body.
    let mm = src
        .replace("(%0, %1, %2) {", "(%0, %1) {")
        .replace("Add \"add\"", "MatMul \"mm\"");
    let (e, i) = errors(&mm, &ins);
    for m in [e, i] {
        assert!(m.contains("MatMul") && m.contains("element-wise"), "{m}");
    }
    // An untyped body output: evaluation works, inference cannot give a dtype.
    let untyped = src
        .replace("(%0, %1, %2) {", "(%0, %1) {")
        .replace("%2 \"s\": f32[4] =", "%2 \"s\" =");
    let g = parse(&untyped).expect("parses");
    let out = interp::run(&g, &ins).expect("runs");
    assert_eq!(out[0].shape(), &[4]);
    let mut typed = g.clone();
    let e = infer_types(&mut typed).expect_err("untyped").to_string();
    assert!(e.contains("no declared type"), "{e}");
}
