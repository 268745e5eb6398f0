{{enable}}// {{what}}: one invocation per output element (grid-stride) walks its window, skipping
// taps outside the input; f32 arithmetic, one rounding at the store.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{t}}>;
{{idx}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{total}}u; i = i + stride) {
{{decode}}{{body}}        y[i] = {{store}};
    }
}
