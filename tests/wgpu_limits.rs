//! Device limits are checked before a plan touches the device (issue 5): a tensor larger
//! than the adapter's storage binding limit is refused with an error naming the kernel
//! and its node, never a wgpu validation panic. The device is opened with the limits
//! every WebGPU implementation guarantees (128 MiB per storage binding), so the check
//! runs on lavapipe in CI without allocating anything large.

use gopt::runtime::wgpu::{Limits, WgpuDevice, WgpuExecutable, WgpuWeights};
use std::sync::Arc;

#[test]
fn a_tensor_above_the_binding_limit_is_a_clear_error() {
    let g = gopt::ir::verify(
        gopt::ir::text::parse(
            r#"graph "g"(%0 "x": f32[40000000]) -> (%1) {
  %1 "y": f32[40000000] = Relu "big_relu"(%0)
}"#,
        )
        .expect("parses"),
    )
    .expect("verifies");
    let (plan, blob) = gopt::codegen::wgsl::plan::build(&g).expect("plans");
    let dev = WgpuDevice::open_with_limits(None, Some(Limits::default()))
        .unwrap_or_else(|e| panic!("{e}"));
    let err = match WgpuExecutable::new(Arc::new(dev), plan, &mut WgpuWeights::default(), &blob) {
        Ok(_) => panic!("a 160 MB binding was accepted under a 128 MiB limit"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("big_relu")
            && err.contains("storage binding limit")
            && err.contains("160000000"),
        "{err}"
    );
}
