//! The one list of kernel families a writer dispatches on. Both writers name each
//! family's module alike (`cuda::elementwise`, `wgsl::elementwise`, ...) with an
//! `emit(spec, name)` of their own, so one match serves both: [`write_spec!`] expands,
//! in the writer that calls it, to an exhaustive `match` over [`super::Spec`] calling
//! that writer's `<family>::emit`. A new family is then one arm here, and the compiler
//! asks each writer for its module.

/// `write_spec!(spec, name)`: the kernel of `spec` (a `&Spec`) named `name`, written by
/// the calling backend's `<family>::emit(spec, name)`; a [`super::Spec::Shallow`] is
/// refused ([`super::shallow_written`]).
macro_rules! write_spec {
    ($spec:expr, $name:expr) => {{
        use $crate::lower::Spec;
        match $spec {
            Spec::Shallow(kind) => Err($crate::lower::shallow_written(*kind)),
            Spec::Elementwise(s) => elementwise::emit(s, $name),
            Spec::Trilu(s) => trilu::emit(s, $name),
            Spec::GatherElements(s) => gather_elements::emit(s, $name),
            Spec::Arg(s) => arg::emit(s, $name),
            Spec::Cumulative(s) => cumulative::emit(s, $name),
            Spec::Loss(s) => loss::emit(s, $name),
            Spec::Rows(s) => rows::emit(s, $name),
            Spec::Reduce(s) => reduce::emit(s, $name),
            Spec::Movement(s) => movement::emit(s, $name),
            Spec::SplitPad(s) => split_pad::emit(s, $name),
            Spec::Glu(s) => glu::emit(s, $name),
            Spec::Rotary(s) => rotary::emit(s, $name),
            Spec::TopK(s) => topk::emit(s, $name),
            Spec::Norm(s) => norm::emit(s, $name),
            Spec::Counted(s) => counted::emit(s, $name),
            Spec::Conv(s) => conv::emit(s, $name),
            Spec::Einsum(s) => einsum::emit(s, $name),
            Spec::Quant(s) => quant::emit(s, $name),
            Spec::ConvTranspose(s) => conv_transpose::emit(s, $name),
            Spec::ConvNd(s) => conv_nd::emit(s, $name),
            Spec::ConvState(s) => conv_state::emit(s, $name),
            Spec::Pool(s) => pool::emit(s, $name),
            Spec::Resize(s) => resize::emit(s, $name),
            Spec::Recurrent(s) => recurrent::emit(s, $name),
            Spec::Sample(s) => sample::emit(s, $name),
            Spec::Attention(s) => attention::emit(s, $name),
            Spec::Spectral(s) => spectral::emit(s, $name),
            Spec::LinearAttention(s) => linear_attention::emit(s, $name),
            Spec::Scatter(s) => scatter::emit(s, $name),
            Spec::Indexed(s) => indexed::emit(s, $name),
        }
    }};
}
pub(crate) use write_spec;
