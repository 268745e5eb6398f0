//! A small ResNet in the exporter's ops (NCHW `Conv`, `Relu`, `Add`, `MaxPool`,
//! `GlobalAveragePool`, `Flatten`, `Gemm`), for the tests of ResNet's epilogue order
//! and channels-last pooling: a 7x7 stride-2 stem with Relu, a 3x3 stride-2 MaxPool,
//! a bottleneck with a 1x1 downsample shortcut and one with the identity, each ending
//! in `relu(conv(x) + b + shortcut)`, and the pooled classifier head.

use gopt::ir::{verify, Verified};

/// `n` pseudo-random values in [-scale, scale), formatted for `const [...]`.
fn vals(n: usize, seed: u64, scale: f64) -> String {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<String> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            format!(
                "{:.5}",
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
            )
        })
        .collect();
    format!("[{}]", v.join(", "))
}

/// Lines of the graph body, with fresh value ids.
struct Body {
    lines: Vec<String>,
    next: usize,
    seed: u64,
}

impl Body {
    fn value(&mut self) -> String {
        self.next += 1;
        format!("%{}", self.next)
    }

    fn konst(&mut self, name: &str, shape: &[usize], scale: f64) -> String {
        let v = self.value();
        let n: usize = shape.iter().product();
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        self.seed += 1;
        self.lines.push(format!(
            "{v} \"{name}\": f32[{}] = const {}",
            dims.join(","),
            vals(n, self.seed, scale)
        ));
        v
    }

    fn op(&mut self, name: &str, call: &str) -> String {
        let v = self.value();
        self.lines.push(format!("{v} \"{name}\" = {call}"));
        v
    }

    /// Conv with bias, `k`x`k`, padding `k / 2`, He-scaled weights.
    fn conv(&mut self, name: &str, x: &str, c: usize, m: usize, k: usize, s: usize) -> String {
        let w = self.konst(
            &format!("{name}_w"),
            &[m, c, k, k],
            (2.0 / (c * k * k) as f64).sqrt(),
        );
        let b = self.konst(&format!("{name}_b"), &[m], 0.1);
        let p = k / 2;
        self.op(
            name,
            &format!("Conv \"{name}\"({x}, {w}, {b}) {{kernel_shape=ints[{k},{k}], pads=ints[{p},{p},{p},{p}], strides=ints[{s},{s}]}}"),
        )
    }

    fn relu(&mut self, name: &str, x: &str) -> String {
        self.op(name, &format!("Relu \"{name}\"({x})"))
    }

    fn bottleneck(&mut self, name: &str, x: &str, c: usize, mid: usize, out: usize) -> String {
        let a = self.conv(&format!("{name}_c1"), x, c, mid, 1, 1);
        let a = self.relu(&format!("{name}_r1"), &a);
        let a = self.conv(&format!("{name}_c2"), &a, mid, mid, 3, 1);
        let a = self.relu(&format!("{name}_r2"), &a);
        let a = self.conv(&format!("{name}_c3"), &a, mid, out, 1, 1);
        let short = if c == out {
            x.to_string()
        } else {
            self.conv(&format!("{name}_down"), x, c, out, 1, 1)
        };
        let s = self.op(
            &format!("{name}_add"),
            &format!("Add \"{name}_add\"({a}, {short})"),
        );
        self.relu(&format!("{name}_out"), &s)
    }
}

/// The model for a batch of `n` 3x32x32 images: `[n, 10]` logits.
pub fn resnet_block(n: usize) -> Verified {
    let mut b = Body {
        lines: Vec::new(),
        next: 0,
        seed: 0,
    };
    let y = b.conv("stem", "%0", 3, 16, 7, 2);
    let y = b.relu("stem_relu", &y);
    let y = b.op(
        "pool",
        &format!("MaxPool \"pool\"({y}) {{kernel_shape=ints[3,3], pads=ints[1,1,1,1], strides=ints[2,2]}}"),
    );
    let y = b.bottleneck("b1", &y, 16, 8, 32);
    let y = b.bottleneck("b2", &y, 32, 8, 32);
    let y = b.op("gap", &format!("GlobalAveragePool \"gap\"({y})"));
    let y = b.op("flat", &format!("Flatten \"flat\"({y}) {{axis=1}}"));
    let w = b.konst("fc_w", &[10, 32], 0.3);
    let bias = b.konst("fc_b", &[10], 0.1);
    let out = b.op(
        "logits",
        &format!("Gemm \"fc\"({y}, {w}, {bias}) {{transB=1}}"),
    );
    let text = format!(
        "graph \"resnet_block\"(%0 \"x\": f32[{n},3,32,32]) -> ({out}) {{\n  {}\n}}\n",
        b.lines.join("\n  ")
    );
    let g = gopt::ir::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify(g).unwrap_or_else(|e| panic!("{e}\n{text}"))
}
