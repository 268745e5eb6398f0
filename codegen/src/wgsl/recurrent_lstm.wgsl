const INPUT_FORGET: bool = {{input_forget}};

var<workgroup> c: array<f32, HID>;

// Peephole j of direction d (Pi, Po, Pf; zero without P).
fn peep(d: u32, j: u32) -> f32 {
    return {{peep}};
}

// One LSTM step: the i, o, f, c gate rows (x_t W^T + Wb + h R^T + Rb), then the cell
// state c = f c + i g(c gate) and h = o h(c), the peepholes added to i, f (old c) and
// o (new c).
fn step(d: u32, tid: u32, xo: u32, yo: u32) {
    for (var j = tid; j < ROWS; j = j + THREADS) {
        let row = d * ROWS + j;
        g[j] = xdot(xo, row) + wb(d, j) + hdot(row) + rb(d, j);
    }
    workgroupBarrier();
    for (var j = tid; j < HID; j = j + THREADS) {
        let cp = c[j];
        let ig = act0(g[j] + peep(d, j) * cp, d);
        var fg = 1.0 - ig;
        if (!INPUT_FORGET) {
            fg = act0(g[2u * HID + j] + peep(d, 2u * HID + j) * cp, d);
        }
        let cn = fg * cp + ig * act1(g[3u * HID + j], d);
        let og = act0(g[HID + j] + peep(d, HID + j) * cn, d);
        let v = og * act2(cn, d);
        c[j] = cn;
        h[j] = v;
        y[yo + j] = st(v);
    }
    workgroupBarrier();
}
