{{enable}}// {{what}} ({{reduction}}) over {{m}} targets of {{c}} classes ({{d}} positions per
// sample): each target's loss in f32 ({{how}}); a target equal to ignore_index
// weighs 0, one outside the classes raises the node's code in gopt_err.
{{bindings}}
var<workgroup> red: array<f32, 256>;
var<workgroup> redw: array<f32, 256>;

{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    var ls: f32 = 0.0;
    var ws: f32 = 0.0;
    for (var i: u32 = {{start}}; i < {{m}}u; i = i + {{step}}) {
        let base = (i / {{d}}u) * {{cd}}u + i % {{d}}u;
{{prep}}        let tw = tgt[i];
{{read}}        var loss: f32 = 0.0;
        var w: f32 = 0.0;
        if (!ignored && valid) {
            let k = u32(t);
            w = {{weight}};
            loss = -({{xk}}) * w;
        }
{{each}}        ls = ls + loss;
        ws = ws + w;
    }
{{finish}}}
