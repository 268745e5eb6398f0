{{enable}}// {{what}}: {{how}}; f32 accumulation, one rounding at the store.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{t}}>;
var<workgroup> red: array<f32, 256>;

{{helpers}}fn comb(a: f32, b: f32) -> f32 {
    return {{combine}};
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let identity: f32 = {{identity}};
{{body}}}
