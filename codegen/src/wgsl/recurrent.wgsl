{{enable}}// {{op}} ({{what}}): one workgroup of {{threads}} invocations per (direction, batch row),
// direction-major, runs that row's sequence step by step: per step the invocations
// split the gate rows (dot products over x_t and over the hidden state, which stays in
// workgroup memory), then the hidden elements, a barrier after each phase
// (`step`). A row of sequence length n runs time steps 0..n (n-1 down to 0 when
// reversed); Y stays zero past them and Y_h is the state after them. Computed in f32.
{{bindings}}
const SEQ: u32 = {{seq}}u;
const IN: u32 = {{input}}u;
const HID: u32 = {{hidden}}u;
const ROWS: u32 = {{rows}}u;
const THREADS: u32 = {{threads}}u;

var<workgroup> h: array<f32, HID>;
var<workgroup> g: array<f32, ROWS>;
var<workgroup> steps: u32;

fn st(v: f32) -> {{t}} {
    return {{t}}(v);
}

// Wb and Rb of gate row j of direction d (zero without B).
fn wb(d: u32, j: u32) -> f32 {
    return {{wb}};
}

fn rb(d: u32, j: u32) -> f32 {
    return {{rb}};
}

// x_t . W[row] (x_t at X offset xo; `row` counts the rows of every direction).
fn xdot(xo: u32, row: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < IN; k = k + 1u) {
        s = s + f32(x[xo + k]) * f32(w[row * IN + k]);
    }
    return s;
}

// h . R[row].
fn hdot(row: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < HID; k = k + 1u) {
        s = s + h[k] * f32(r[row * HID + k]);
    }
    return s;
}

{{acts}}{{cell}}
@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let d = wid.x / {{batch}}u;
    let b = wid.x % {{batch}}u;
    let rev = d == 1u || {{reverse}};
    if (tid == 0u) {
{{len}}    }
    let n = workgroupUniformLoad(&steps);
    let so = d * {{sd}}u + b * {{sb}}u;
    for (var j = tid; j < HID; j = j + THREADS) {
        h[j] = {{h0}};
{{c0}}    }
    for (var e = tid; e < (SEQ - n) * HID; e = e + THREADS) {
        y[(n + e / HID) * {{yt}}u + d * {{yd}}u + b * {{yb}}u + e % HID] = st(0.0);
    }
    workgroupBarrier();
    for (var i = 0u; i < n; i = i + 1u) {
        let t = select(i, n - 1u - i, rev);
        step(d, tid, t * {{xt}}u + b * {{xb}}u, t * {{yt}}u + d * {{yd}}u + b * {{yb}}u);
    }
{{last}}}
