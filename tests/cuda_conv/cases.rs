//! The case matrix of tests/cuda_conv.rs: convolutions (one builder, [`Conv`], varied
//! per case), pools, reductions, Split and Pad, each as IR text in f32, bf16 and f16.

pub fn shape(s: &[usize]) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", v.join(","))
}

/// One convolution case.
#[derive(Clone)]
pub struct Conv {
    pub dt: &'static str,
    pub n: usize,
    pub c: usize,
    pub hw: usize,
    pub m: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub dil: usize,
    pub group: usize,
    pub bias: bool,
    pub act: &'static str,
    pub residual: Option<Vec<usize>>,
    /// The residual is added before the activation (`epilogue="bias_residual_act"`).
    pub residual_first: bool,
    pub out_dt: Option<&'static str>,
    pub plain: bool,
    pub nhwc: bool,
}

pub fn conv(dt: &'static str, c: usize, m: usize, k: usize, stride: usize, pad: usize) -> Conv {
    Conv {
        dt,
        n: 1,
        c,
        hw: 14,
        m,
        k,
        stride,
        pad,
        dil: 1,
        group: 1,
        bias: true,
        act: "none",
        residual: None,
        residual_first: false,
        out_dt: None,
        plain: false,
        nhwc: false,
    }
}

impl Conv {
    pub fn out_hw(&self) -> usize {
        (self.hw + 2 * self.pad - self.dil * (self.k - 1) - 1) / self.stride + 1
    }
    pub fn y(&self) -> Vec<usize> {
        let o = self.out_hw();
        if self.nhwc {
            vec![self.n, o, o, self.m]
        } else {
            vec![self.n, self.m, o, o]
        }
    }
    pub fn name(&self) -> String {
        format!(
            "{} {}->{} {}x{} s{} p{} d{} g{}{}{}{} {}{}{}",
            self.dt,
            self.c,
            self.m,
            self.k,
            self.k,
            self.stride,
            self.pad,
            self.dil,
            self.group,
            if self.bias { " bias" } else { "" },
            if self.residual.is_some() {
                " residual"
            } else {
                ""
            },
            if self.residual_first { " then" } else { "" },
            self.act,
            self.out_dt.map(|d| format!(" -> {d}")).unwrap_or_default(),
            if self.plain {
                " (Conv)"
            } else if self.nhwc {
                " NHWC"
            } else {
                ""
            }
        )
    }
    pub fn text(&self) -> String {
        let (dt, out_dt) = (self.dt, self.out_dt.unwrap_or(self.dt));
        let x = if self.nhwc {
            vec![self.n, self.hw, self.hw, self.c]
        } else {
            vec![self.n, self.c, self.hw, self.hw]
        };
        let mut ins = vec![
            format!("%0 \"x\": {dt}{}", shape(&x)),
            format!(
                "%1 \"w\": {dt}{}",
                shape(&[self.m, self.c / self.group, self.k, self.k])
            ),
        ];
        let mut args = vec!["%0".to_string(), "%1".to_string()];
        if self.bias {
            ins.push(format!("%2 \"b\": {dt}[{}]", self.m));
            args.push("%2".into());
        } else if self.residual.is_some() {
            args.push("_".into());
        }
        if let Some(r) = &self.residual {
            ins.push(format!("%3 \"r\": {out_dt}{}", shape(r)));
            args.push("%3".into());
        }
        let (p, s, d) = (self.pad, self.stride, self.dil);
        let mut attrs = format!(
            "group={}, pads=ints[{p},{p},{p},{p}], strides=ints[{s},{s}], dilations=ints[{d},{d}]",
            self.group
        );
        if !self.plain {
            attrs += &format!(", activation=\"{}\"", self.act);
            if self.act == "clip" {
                attrs += ", clip_min=0.0, clip_max=6.0";
            }
            if let Some(o) = self.out_dt {
                attrs += &format!(", output_dtype=dtype {o}");
            }
            if self.residual_first {
                attrs += ", epilogue=\"bias_residual_act\"";
            }
            if self.nhwc {
                attrs += ", layout=\"NHWC\"";
            }
        }
        format!(
            "graph \"g\"({}) -> (%9) {{\n  %9 \"y\": {out_dt}{} = {} \"conv\"({}) {{{attrs}}}\n}}",
            ins.join(", "),
            shape(&self.y()),
            if self.plain { "Conv" } else { "FusedConv" },
            args.join(", ")
        )
    }
}

/// The convolution matrix for one dtype.
pub fn conv_cases(dt: &'static str) -> Vec<Conv> {
    let base = conv(dt, 16, 32, 3, 1, 1);
    let mut v = vec![
        Conv {
            act: "relu",
            ..base.clone()
        },
        Conv {
            hw: 15,
            m: 24,
            stride: 2,
            bias: false,
            ..base.clone()
        },
        Conv {
            c: 32,
            m: 48,
            hw: 7,
            k: 1,
            pad: 0,
            act: "clip",
            residual: Some(vec![1, 48, 7, 7]),
            ..base.clone()
        },
        Conv {
            k: 1,
            pad: 0,
            stride: 2,
            act: "sigmoid",
            ..base.clone()
        },
        Conv {
            c: 32,
            m: 32,
            group: 32,
            act: "clip",
            ..base.clone()
        },
        Conv {
            c: 24,
            m: 24,
            group: 24,
            stride: 2,
            bias: false,
            ..base.clone()
        },
        Conv {
            c: 8,
            m: 16,
            group: 8,
            act: "relu",
            ..base.clone()
        },
        Conv {
            m: 16,
            group: 2,
            act: "silu",
            ..base.clone()
        },
        Conv {
            n: 2,
            c: 3,
            m: 16,
            hw: 32,
            k: 7,
            stride: 2,
            pad: 3,
            act: "relu",
            ..base.clone()
        },
        Conv {
            c: 8,
            m: 8,
            pad: 2,
            dil: 2,
            act: "sigmoid",
            ..base.clone()
        },
        Conv {
            residual: Some(vec![32, 1, 1]),
            act: "silu",
            ..base.clone()
        },
        Conv {
            bias: false,
            residual: Some(vec![1, 32, 14, 14]),
            ..base.clone()
        },
        Conv {
            plain: true,
            ..base.clone()
        },
        Conv {
            plain: true,
            bias: false,
            k: 1,
            pad: 0,
            ..base.clone()
        },
        Conv {
            nhwc: true,
            act: "relu",
            residual: Some(vec![1, 14, 14, 32]),
            ..base.clone()
        },
        Conv {
            nhwc: true,
            c: 16,
            m: 16,
            group: 16,
            stride: 2,
            ..base.clone()
        },
        // ResNet's order, relu(conv + b + residual): implicit GEMM, NHWC with a
        // broadcast residual, depthwise (the direct kernel).
        Conv {
            act: "relu",
            residual: Some(vec![1, 32, 14, 14]),
            residual_first: true,
            ..base.clone()
        },
        Conv {
            nhwc: true,
            act: "clip",
            residual: Some(vec![32]),
            residual_first: true,
            ..base.clone()
        },
        Conv {
            c: 32,
            m: 32,
            group: 32,
            act: "relu",
            residual: Some(vec![1, 32, 14, 14]),
            residual_first: true,
            ..base.clone()
        },
        // Enough tiles for the large-tile kernels (>= 264 blocks).
        Conv {
            n: 8,
            c: 32,
            hw: 48,
            m: 256,
            act: "relu",
            residual: Some(vec![8, 256, 48, 48]),
            ..base.clone()
        },
    ];
    if dt != "f32" {
        // The precision pass's form: low-precision operands, f32 output and residual.
        v.push(Conv {
            out_dt: Some("f32"),
            act: "clip",
            residual: Some(vec![1, 32, 14, 14]),
            ..base.clone()
        });
        v.push(Conv {
            out_dt: Some("f32"),
            c: 32,
            m: 64,
            k: 1,
            pad: 0,
            ..base.clone()
        });
        v.push(Conv {
            out_dt: Some("f32"),
            act: "relu",
            residual: Some(vec![1, 32, 14, 14]),
            residual_first: true,
            ..base
        });
    }
    v
}

/// Pools, reductions, Split and Pad for one dtype: (name, graph text).
pub fn other_cases(dt: &str) -> Vec<(String, String)> {
    let one = |name: &str, xs: &[usize], ys: &[usize], consts: &str, op: &str| {
        (
            format!("{dt} {name}"),
            format!(
                "graph \"g\"(%0 \"x\": {dt}{}) -> (%9) {{\n{consts}  %9 \"y\": {dt}{} = {op}\n}}",
                shape(xs),
                shape(ys)
            ),
        )
    };
    let axes = |v: &str, n: usize| format!("  %1 \"axes\": i64[{n}] = const [{v}]\n");
    let pads = "  %1 \"pads\": i64[8] = const [0, 0, 1, 2, 0, 0, 2, 1]\n";
    let mut v = vec![
        one("MaxPool 3x3 s2 p1", &[2, 8, 16, 16], &[2, 8, 8, 8], "", "MaxPool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2]}"),
        one("AveragePool 3x3 s1 p1", &[1, 8, 9, 9], &[1, 8, 9, 9], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1]}"),
        one("AveragePool count_include_pad", &[1, 8, 9, 9], &[1, 8, 5, 5], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2], count_include_pad=1}"),
        one("AveragePool ceil_mode", &[1, 4, 7, 7], &[1, 4, 4, 4], "", "AveragePool \"p\"(%0) {kernel_shape=ints[2,2], strides=ints[2,2], ceil_mode=1, count_include_pad=1}"),
        // Channels-last pools as the layout pass writes them: [N, 1, H, W, C], window 1
        // over C.
        one("MaxPool NHWC 3x3 s2 p1", &[2, 1, 16, 16, 8], &[2, 1, 8, 8, 8], "", "MaxPool \"p\"(%0) {kernel_shape=ints[3,3,1], pads=ints[1,1,0,1,1,0], strides=ints[2,2,1]}"),
        one("AveragePool NHWC count_include_pad", &[1, 1, 9, 9, 8], &[1, 1, 5, 5, 8], "", "AveragePool \"p\"(%0) {kernel_shape=ints[3,3,1], pads=ints[1,1,0,1,1,0], strides=ints[2,2,1], count_include_pad=1}"),
        one("GlobalAveragePool", &[2, 64, 7, 7], &[2, 64, 1, 1], "", "GlobalAveragePool \"p\"(%0)"),
        one("GlobalMaxPool", &[2, 64, 7, 7], &[2, 64, 1, 1], "", "GlobalMaxPool \"p\"(%0)"),
        one("ReduceMean [2,3]", &[1, 1280, 7, 7], &[1, 1280, 1, 1], &axes("2, 3", 2), "ReduceMean \"r\"(%0, %1) {keepdims=1}"),
        one("ReduceMean [-1]", &[4, 6, 2048], &[4, 6], &axes("-1", 1), "ReduceMean \"r\"(%0, %1) {keepdims=0}"),
        one("ReduceSum [1]", &[2, 5, 7], &[2, 1, 7], &axes("1", 1), "ReduceSum \"r\"(%0, %1) {keepdims=1}"),
        one("ReduceMax [0,2]", &[3, 4, 5], &[4], &axes("0, 2", 2), "ReduceMax \"r\"(%0, %1) {keepdims=0}"),
        one("Pad constant", &[1, 3, 4, 5], &[1, 3, 7, 8], &format!("{pads}  %2 \"v\": {dt}[] = const [1.5]\n"), "Pad \"p\"(%0, %1, %2) {mode=\"constant\"}"),
        one("Pad reflect", &[1, 3, 4, 5], &[1, 3, 7, 8], pads, "Pad \"p\"(%0, %1) {mode=\"reflect\"}"),
        one("Pad edge", &[1, 3, 4, 5], &[1, 3, 7, 8], pads, "Pad \"p\"(%0, %1) {mode=\"edge\"}"),
        one("Pad wrap", &[1, 3, 4, 5], &[1, 3, 7, 8], pads, "Pad \"p\"(%0, %1) {mode=\"wrap\"}"),
    ];
    let split = |name: &str, xs: &[usize], outs: &[Vec<usize>], consts: &str, call: &str| {
        let decls: Vec<String> = outs
            .iter()
            .enumerate()
            .map(|(i, s)| format!("%{} \"y{i}\": {dt}{}", 5 + i, shape(s)))
            .collect();
        let rets: Vec<String> = (0..outs.len()).map(|i| format!("%{}", 5 + i)).collect();
        (
            format!("{dt} {name}"),
            format!(
                "graph \"g\"(%0 \"x\": {dt}{}) -> ({}) {{\n{consts}  {} = {call}\n}}",
                shape(xs),
                rets.join(", "),
                decls.join(", ")
            ),
        )
    };
    let sizes = |v: &str| format!("  %1 \"split\": i64[2] = const [{v}]\n");
    v.push(split(
        "Split equal axis 1",
        &[2, 8, 3],
        &[vec![2, 4, 3], vec![2, 4, 3]],
        "",
        "Split \"s\"(%0) {axis=1, num_outputs=2}",
    ));
    v.push(split(
        "Split uneven axis 1",
        &[2, 5, 4],
        &[vec![2, 1, 4], vec![2, 4, 4]],
        &sizes("1, 4"),
        "Split \"s\"(%0, %1) {axis=1}",
    ));
    v.push(split(
        "Split uneven last axis",
        &[2, 3, 7],
        &[vec![2, 3, 2], vec![2, 3, 5]],
        &sizes("2, 5"),
        "Split \"s\"(%0, %1) {axis=-1}",
    ));
    v.push(split(
        "Split equal last axis",
        &[3, 9],
        &[vec![3, 3], vec![3, 3], vec![3, 3]],
        "",
        "Split \"s\"(%0) {axis=-1, num_outputs=3}",
    ));
    v
}

pub fn one_d(dt: &str) -> (String, String) {
    (
        format!("{dt} 1-D conv k5 s2 p2"),
        format!(
            "graph \"g\"(%0 \"x\": {dt}[2,16,40], %1 \"w\": {dt}[32,16,5], %2 \"b\": {dt}[32]) -> (%9) {{\n  %9 \"y\": {dt}[2,32,20] = FusedConv \"conv\"(%0, %1, %2) {{pads=ints[2,2], strides=ints[2], activation=\"relu\"}}\n}}"
        ),
    )
}

/// Every case: (name, graph text).
pub fn all_cases() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for dt in ["f32", "bf16", "f16"] {
        v.extend(conv_cases(dt).iter().map(|c| (c.name(), c.text())));
        v.push(one_d(dt));
        v.extend(other_cases(dt));
    }
    v
}
