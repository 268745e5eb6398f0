var<workgroup> base: u32;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    if (t == 0u) {
        base = 0u;
    }
    workgroupBarrier();
