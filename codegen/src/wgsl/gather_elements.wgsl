{{enable}}// GatherElements along axis {{axis}}: one invocation per output element in a
// grid-stride loop, the output coordinates unrolled with constant divisors; a
// negative index counts from the end of the axis, one out of range raises the
// node's code in gopt_err and reads element 0.
@group(0) @binding(0) var<storage, read> data: array<{{t}}>;
@group(0) @binding(1) var<storage, read> idx: array<{{it}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{t}}>;
@group(0) @binding(3) var<storage, read_write> gopt_err: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
{{read}}        var r: u32 = i;
        var at: u32 = k * {{kstride}}u;
{{coords}}        out[i] = data[at];
    }
}
