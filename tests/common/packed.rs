//! The one-node MatMulNBits graphs the CUDA and WGSL packed-product tests run
//! (tests/cuda_packed.rs, tests/wgsl_packed.rs): random packed weights, scales around
//! 1/16 of either sign, zero points in each form, an optional bias.

use super::random;
use gopt::ir::ops::nn::nbits::{pack, pack_zero_points, NBits, ZeroPoints};
use gopt::ir::ops::NnOp;
use gopt::ir::{Attr, Attrs, DType, Graph, Op, Tensor, TensorType};

/// One product: A's dtype and shape (`[.., K]`), N, bits, block, zero points, bias.
#[derive(Clone, Debug)]
pub struct Product {
    /// A's, the scales' and the output's dtype.
    pub dt: DType,
    /// A's shape, its last dim K.
    pub a_shape: Vec<usize>,
    /// Output columns.
    pub n: usize,
    /// 4 or 8.
    pub bits: usize,
    /// Weights per block along K.
    pub block: usize,
    /// The zero points' form.
    pub zero: ZeroPoints,
    /// Whether a bias is added.
    pub bias: bool,
}

/// xorshift64: the quantized values and zero points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
}

fn bytes(v: &[u8], shape: &[usize]) -> Tensor {
    let v: Vec<f64> = v.iter().map(|&b| f64::from(b)).collect();
    Tensor::from_f64s(DType::U8, shape, &v).expect("u8 tensor")
}

fn floats(dt: DType, shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64s(dt, shape, v).expect("float tensor")
}

impl Product {
    /// K: A's last dim.
    pub fn k(&self) -> usize {
        *self.a_shape.last().expect("A has a last dim")
    }

    /// The packed layout.
    pub fn nbits(&self) -> NBits {
        let k = self.k();
        NBits {
            k,
            n: self.n,
            bits: self.bits,
            block: self.block,
            blocks: k.div_ceil(self.block),
            blob: self.block * self.bits / 8,
            zero: self.zero,
            bias: self.bias,
        }
    }

    /// The one-node graph, its constants drawn from `seed`, verified.
    pub fn graph(&self, seed: u64) -> Graph {
        let nb = self.nbits();
        let (dt, n, k) = (self.dt, self.n, self.k());
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let below = |rng: &mut Rng, count: usize| -> Vec<u32> {
            (0..count).map(|_| rng.next() % (nb.max_q() + 1)).collect()
        };
        let mut g = Graph::new("nbits");
        let ty = TensorType::new(dt, gopt::ir::dim::shape_of(&self.a_shape));
        let a = g.add_input("a", ty);
        let q = below(&mut rng, n * k);
        let b = g.add_const("b", bytes(&pack(&nb, &q), &[n, nb.blocks, nb.blob]));
        // Scales around 1/16 of either sign, one per (column, block), as [N, blocks].
        let s = random(DType::F64, &[n, nb.blocks], seed + 1).to_f64_vec();
        let s: Vec<f64> = s.iter().map(|v| v / 32.0).collect();
        let s = g.add_const("scales", floats(dt, &[n, nb.blocks], &s));
        let count = n * nb.blocks;
        let zp = match self.zero {
            ZeroPoints::Default => None,
            ZeroPoints::Packed => {
                let z = pack_zero_points(&nb, &below(&mut rng, count));
                let len = z.len();
                Some(g.add_const("zp", bytes(&z, &[len])))
            }
            ZeroPoints::Float => {
                // Any value, not only integers: AWQ stores `zero · scale` folded ones.
                let z: Vec<f64> = (0..count)
                    .map(|_| f64::from(rng.next() % 1024) / 1024.0 * f64::from(nb.max_q()))
                    .collect();
                Some(g.add_const("zp", floats(dt, &[n, nb.blocks], &z)))
            }
        };
        let bias = self
            .bias
            .then(|| g.add_const("bias", random(dt, &[n], seed + 2)));
        let mut attrs = Attrs::default();
        for (key, v) in [
            ("K", k),
            ("N", n),
            ("bits", self.bits),
            ("block_size", self.block),
        ] {
            attrs.set(key, Attr::Int(v as i64));
        }
        let inputs = vec![Some(a), Some(b), Some(s), zp, None, bias];
        let id = g.add_node("mm", Op::Nn(NnOp::MatMulNBits), attrs, inputs, &["y"]);
        g.outputs = vec![g.nodes[id.index()].outputs[0]];
        gopt::ir::verify(g)
            .unwrap_or_else(|e| panic!("{self:?}: {e}"))
            .into_inner()
    }
}
