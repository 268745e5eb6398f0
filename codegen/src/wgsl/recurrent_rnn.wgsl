// One RNN step: every gate row's x_t W^T + Wb + h R^T + Rb, then H = f(that).
fn step(d: u32, tid: u32, xo: u32, yo: u32) {
    for (var j = tid; j < ROWS; j = j + THREADS) {
        let row = d * ROWS + j;
        g[j] = xdot(xo, row) + wb(d, j) + hdot(row) + rb(d, j);
    }
    workgroupBarrier();
    for (var j = tid; j < HID; j = j + THREADS) {
        let v = act0(g[j], d);
        h[j] = v;
        y[yo + j] = st(v);
    }
    workgroupBarrier();
}
