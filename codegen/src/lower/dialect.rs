//! The few spellings in which the CUDA and WGSL kernels of one algorithm differ: integer
//! literals, index declarations, and the widening of a signed coordinate to an index.
//! A family's spec writes its index arithmetic once against a [`Dialect`], so both
//! writers print the same algorithm in their own syntax instead of keeping twins.

/// The language a kernel is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// CUDA C: 64-bit `long long` indices.
    Cuda,
    /// WGSL: `u32` indices.
    Wgsl,
}

impl Dialect {
    /// The suffix of an index literal (`12LL`, `12u`).
    pub fn int(self) -> &'static str {
        match self {
            Dialect::Cuda => "LL",
            Dialect::Wgsl => "u",
        }
    }

    /// An index literal of `v`.
    pub fn lit(self, v: usize) -> String {
        format!("{v}{}", self.int())
    }

    /// The index zero.
    pub fn zero(self) -> &'static str {
        match self {
            Dialect::Cuda => "0LL",
            Dialect::Wgsl => "0u",
        }
    }

    /// The start of an immutable index declaration (`const long long `, `let `).
    pub fn let_(self) -> &'static str {
        match self {
            Dialect::Cuda => "const long long ",
            Dialect::Wgsl => "let ",
        }
    }

    /// The start of a mutable index declaration (`long long `, `var `).
    pub fn var(self) -> &'static str {
        match self {
            Dialect::Cuda => "long long ",
            Dialect::Wgsl => "var ",
        }
    }

    /// Signed coordinate `e` as an index operand: in CUDA `int` promotes by itself
    /// (`lead`: the first operand of a product, cast so the product is 64-bit); in WGSL
    /// every operand is converted to `u32`.
    pub fn index(self, e: &str, lead: bool) -> String {
        match self {
            Dialect::Cuda if lead => format!("(long long){e}"),
            Dialect::Cuda => e.to_string(),
            Dialect::Wgsl => format!("u32({e})"),
        }
    }

    /// The suffix of a signed coordinate literal (`12LL`; WGSL's `i32` takes `12`).
    pub fn signed(self) -> &'static str {
        match self {
            Dialect::Cuda => "LL",
            Dialect::Wgsl => "",
        }
    }

    /// The head of a loop of signed counter `v` over `0..n` (its body and `}` follow).
    pub fn count_loop(self, v: &str, n: usize) -> String {
        match self {
            Dialect::Cuda => format!("for (long long {v} = 0; {v} < {n}LL; ++{v}) {{"),
            Dialect::Wgsl => format!("for (var {v}: i32 = 0; {v} < {n}; {v} = {v} + 1) {{"),
        }
    }

    /// The statement skipping to the loop's next iteration when `cond` holds.
    pub fn continue_if(self, cond: &str) -> String {
        match self {
            Dialect::Cuda => format!("if ({cond}) continue;"),
            Dialect::Wgsl => format!("if ({cond}) {{ continue; }}"),
        }
    }

    /// The head of a loop of 32-bit signed counter `v` over `0..n`.
    pub fn int_loop(self, v: &str, n: usize) -> String {
        match self {
            Dialect::Cuda => format!("for (int {v} = 0; {v} < {n}; ++{v}) {{"),
            Dialect::Wgsl => format!("for (var {v}: i32 = 0; {v} < {n}; {v} = {v} + 1) {{"),
        }
    }
}
