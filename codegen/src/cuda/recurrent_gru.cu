    constexpr bool LBR = {{lbr}};

    // The hidden gate's recurrent part (h R_h^T + Rb_h with linear_before_reset, else
    // (r * h) R_h^T), and r * h.
    __shared__ float gh[HID];
    __shared__ float rh[HID];

    // (r * h) . R[row].
    auto rhdot = [&](int row) -> float {
        float s = 0.0f;
        for (int k = 0; k < HID; ++k) {
            s = s + rh[k] * gopt_ld(r[row * HID + k]);
        }
        return s;
    };

    // One GRU step: z and r's rows (x_t W^T + Wb + h R^T + Rb) and the hidden gate's
    // input part (x_t W_h^T + Wb_h) and recurrent part, then h = (1 - z) g(hidden) + z h.
    auto step = [&](int d, int tid, int xo, int yo) {
        for (int j = tid; j < ROWS; j += THREADS) {
            const int row = d * ROWS + j;
            const float xw = xdot(xo, row) + wb(d, j);
            if (j < 2 * HID) {
                g[j] = xw + hdot(row) + rb(d, j);
            } else {
                g[j] = xw;
                if (LBR) {
                    gh[j - 2 * HID] = hdot(row) + rb(d, j);
                }
            }
        }
        __syncthreads();
        if (!LBR) {
            for (int j = tid; j < HID; j += THREADS) {
                rh[j] = act0(g[HID + j], d) * h[j];
            }
            __syncthreads();
            for (int j = tid; j < HID; j += THREADS) {
                gh[j] = rhdot(d * ROWS + 2 * HID + j);
            }
            __syncthreads();
        }
        for (int j = tid; j < HID; j += THREADS) {
            const float z = act0(g[j], d);
            const float rg = act0(g[HID + j], d);
            float pre = g[2 * HID + j] + gh[j] + rb(d, 2 * HID + j);
            if (LBR) {
                pre = g[2 * HID + j] + rg * gh[j];
            }
            const float v = (1.0f - z) * act1(pre, d) + z * h[j];
            h[j] = v;
            y[yo + j] = st(v);
        }
        __syncthreads();
    };
