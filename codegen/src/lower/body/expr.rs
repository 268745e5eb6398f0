//! The vocabulary element-wise ops are described in ([`Expr`]), once for both
//! writers: arguments, literals, infix operators the languages share, selects, helpers
//! both preludes define, and primitives ([`Prim`]) each writer spells in its own way.
//! [`super::describe`] writes each op in it; `crate::cuda::elementwise::expr` and
//! `crate::wgsl::elementwise_expr` print it.

/// One element-wise op's computation: a small tree over the step's arguments that each
/// writer prints in its syntax. A new op composed of what is here needs no writer
/// change; a new [`Prim`] is spelled by each.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The step's argument `k`.
    Arg(usize),
    /// A float literal as written without a suffix (`1.0`; CUDA adds `f`).
    Num(String),
    /// An attribute's value, and the attribute's name (WGSL refuses a non-finite one).
    Attr(f32, &'static str),
    /// `(a o b)`.
    Paren(Bin, Box<Expr>, Box<Expr>),
    /// `a o b`, unparenthesized (an argument or a condition).
    Flat(Bin, Box<Expr>, Box<Expr>),
    /// `(!a)` or `(~a)`.
    Not(Not, Box<Expr>),
    /// `c ? a : b`: CUDA `(c ? a : b)`, WGSL `select(b, a, c)`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A helper both preludes define under one name (`gopt_sigmoid(a)`).
    Helper(&'static str, Vec<Expr>),
    /// A primitive each writer spells in its own way.
    Prim(Prim, Vec<Expr>),
}

/// An infix operator, the same in CUDA and WGSL. In [`Expr::Paren`], `+`, `-` and `*`
/// on 64-bit integers are WGSL's exact helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bin {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` as the language has it (ONNX Div is [`Prim::Div`]).
    Div,
    /// `<`.
    Lt,
    /// `>`.
    Gt,
    /// `&&` (bools).
    And,
    /// `||` (bools).
    Or,
    /// `!=` (Xor of bools).
    Ne,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
}

impl Bin {
    /// The operator's text.
    pub fn text(self) -> &'static str {
        match self {
            Bin::Add => "+",
            Bin::Sub => "-",
            Bin::Mul => "*",
            Bin::Div => "/",
            Bin::Lt => "<",
            Bin::Gt => ">",
            Bin::And => "&&",
            Bin::Or => "||",
            Bin::Ne => "!=",
            Bin::BitAnd => "&",
            Bin::BitOr => "|",
            Bin::BitXor => "^",
        }
    }
}

/// A prefix operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Not {
    /// `!` (bools).
    Logical,
    /// `~` (integers).
    Bitwise,
}

/// A comparison of ONNX's (IEEE for floats: NaN compares false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `==`.
    Eq,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl Cmp {
    /// The operator's text.
    pub fn text(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

/// A primitive whose spelling differs between the languages: a function one has and
/// the other writes as a formula, or an op whose typed forms (64-bit integers in WGSL,
/// NaN handling) each writer decides. Its arguments are in [`Expr::Prim`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prim {
    /// Float math of one argument (CUDA's function, `f`-suffixed in float).
    Sqrt,
    /// e^a.
    Exp,
    /// The natural logarithm.
    Log,
    /// Rounded up.
    Ceil,
    /// Rounded down.
    Floor,
    /// Rounded to the nearest, ties to even.
    Round,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Tangent.
    Tan,
    /// Arc sine.
    Asin,
    /// Arc cosine.
    Acos,
    /// Arc tangent.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// Hyperbolic tangent.
    Tanh,
    /// The error function.
    Erf,
    /// e^a - 1.
    Expm1,
    /// |a| of a float.
    FAbs,
    /// The larger of two floats (the other where one is NaN).
    FMax,
    /// The smaller of two floats (the other where one is NaN).
    FMin,
    /// `min(max(a, lo), hi)` of floats.
    Clamp,
    /// GELU, the tanh approximation when `true`.
    Gelu(bool),
    /// ONNX Div (IEEE for floats).
    Div,
    /// ONNX Pow (numpy's edge cases).
    Pow,
    /// ONNX Mod: the remainder takes the dividend's sign when `true` (C's `fmod`).
    Mod(bool),
    /// -a.
    Neg,
    /// |a|.
    Abs,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// max(a, 0), NaN stays NaN.
    Relu,
    /// a, times the slope `b` where negative.
    PRelu,
    /// a, times `b` (alpha) where negative.
    LeakyRelu,
    /// a, `b` (alpha) times e^a - 1 where negative.
    Elu,
    /// Selu over (x, alpha, gamma).
    Selu,
    /// Shifts by `b` bits, left when `true`.
    BitShift(bool),
    /// Whether a is NaN.
    IsNaN,
    /// IsInf detecting (positive, negative) infinities.
    IsInf(bool, bool),
    /// The larger of two values, NaN propagating.
    Max,
    /// The smaller of two values, NaN propagating.
    Min,
    /// `a` raised to at least `b` (Clip's min).
    AtLeast,
    /// `a` lowered to at most `b` (Clip's max).
    AtMost,
    /// An ONNX comparison.
    Compare(Cmp),
    /// A conversion to the step's type.
    Cast,
    /// The bits of a value read as the step's type (one width).
    BitCast,
}
