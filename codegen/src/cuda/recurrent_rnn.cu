    // One RNN step: every gate row's x_t W^T + Wb + h R^T + Rb, then H = f(that).
    auto step = [&](int d, int tid, int xo, int yo) {
        for (int j = tid; j < ROWS; j += THREADS) {
            const int row = d * ROWS + j;
            g[j] = xdot(xo, row) + wb(d, j) + hdot(row) + rb(d, j);
        }
        __syncthreads();
        for (int j = tid; j < HID; j += THREADS) {
            const float v = act0(g[j], d);
            h[j] = v;
            y[yo + j] = st(v);
        }
        __syncthreads();
    };
