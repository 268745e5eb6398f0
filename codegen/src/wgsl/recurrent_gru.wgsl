const LBR: bool = {{lbr}};

// The hidden gate's recurrent part (h R_h^T + Rb_h with linear_before_reset, else
// (r * h) R_h^T), and r * h.
var<workgroup> gh: array<f32, HID>;
var<workgroup> rh: array<f32, HID>;

// (r * h) . R[row].
fn rhdot(row: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < HID; k = k + 1u) {
        s = s + rh[k] * f32(r[row * HID + k]);
    }
    return s;
}

// One GRU step: z and r's rows (x_t W^T + Wb + h R^T + Rb) and the hidden gate's input
// part (x_t W_h^T + Wb_h) and recurrent part, then h = (1 - z) g(hidden) + z h.
fn step(d: u32, tid: u32, xo: u32, yo: u32) {
    for (var j = tid; j < ROWS; j = j + THREADS) {
        let row = d * ROWS + j;
        let xw = xdot(xo, row) + wb(d, j);
        if (j < 2u * HID) {
            g[j] = xw + hdot(row) + rb(d, j);
        } else {
            g[j] = xw;
            if (LBR) {
                gh[j - 2u * HID] = hdot(row) + rb(d, j);
            }
        }
    }
    workgroupBarrier();
    if (!LBR) {
        for (var j = tid; j < HID; j = j + THREADS) {
            rh[j] = act0(g[HID + j], d) * h[j];
        }
        workgroupBarrier();
        for (var j = tid; j < HID; j = j + THREADS) {
            gh[j] = rhdot(d * ROWS + 2u * HID + j);
        }
        workgroupBarrier();
    }
    for (var j = tid; j < HID; j = j + THREADS) {
        let z = act0(g[j], d);
        let rg = act0(g[HID + j], d);
        var pre = g[2u * HID + j] + gh[j] + rb(d, 2u * HID + j);
        if (LBR) {
            pre = g[2u * HID + j] + rg * gh[j];
        }
        let v = (1.0 - z) * act1(pre, d) + z * h[j];
        h[j] = v;
        y[yo + j] = st(v);
    }
    workgroupBarrier();
}
