    constexpr bool INPUT_FORGET = {{input_forget}};

    __shared__ float c[HID];

    // Peephole j of direction d (Pi, Po, Pf; zero without P).
    auto peep = [&](int d, int j) -> float { return {{peep}}; };

    // One LSTM step: the i, o, f, c gate rows (x_t W^T + Wb + h R^T + Rb), then the
    // cell state c = f c + i g(c gate) and h = o h(c), the peepholes added to i, f (old
    // c) and o (new c).
    auto step = [&](int d, int tid, int xo, int yo) {
        for (int j = tid; j < ROWS; j += THREADS) {
            const int row = d * ROWS + j;
            g[j] = xdot(xo, row) + wb(d, j) + hdot(row) + rb(d, j);
        }
        __syncthreads();
        for (int j = tid; j < HID; j += THREADS) {
            const float cp = c[j];
            const float ig = act0(g[j] + peep(d, j) * cp, d);
            float fg = 1.0f - ig;
            if (!INPUT_FORGET) {
                fg = act0(g[2 * HID + j] + peep(d, 2 * HID + j) * cp, d);
            }
            const float cn = fg * cp + ig * act1(g[3 * HID + j], d);
            const float og = act0(g[HID + j] + peep(d, HID + j) * cn, d);
            const float v = og * act2(cn, d);
            c[j] = cn;
            h[j] = v;
            y[yo + j] = st(v);
        }
        __syncthreads();
    };
