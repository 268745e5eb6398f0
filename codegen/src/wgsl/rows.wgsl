{{enable}}// {{what}} over rows ({{d}} columns, {{rows}} rows): one workgroup per row (looping
// over rows past the dispatch), fp32 sums reduced through workgroup memory.
{{bindings}}
var<workgroup> red: array<f32, 256>;

{{helpers}}

{{reduce_sum}}
fn reduce_max(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s: u32 = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    for (var row: u32 = wid.x; row < {{rows}}u; row = row + nwg.x) {
        let base = {{base}};
{{body}}    }
}
