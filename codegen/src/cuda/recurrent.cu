// {{op}} ({{what}}): one block of {{threads}} threads per (direction, batch row),
// direction-major, runs that row's sequence step by step: per step the threads split
// the gate rows (dot products over x_t and over the hidden state, which stays in
// shared memory), then the hidden elements, a barrier after each phase (`step`). A row
// of sequence length n runs time steps 0..n (n-1 down to 0 when reversed); Y stays
// zero past them and Y_h is the state after them. Computed in f32; the WGSL kernel is
// the same algorithm line by line.
extern "C" __global__ void __launch_bounds__({{threads}}) {{name}}({{params}}) {
    constexpr int SEQ = {{seq}};
    constexpr int IN = {{input}};
    constexpr int HID = {{hidden}};
    constexpr int ROWS = {{rows}};
    constexpr int THREADS = {{threads}};

    __shared__ float h[HID];
    __shared__ float g[ROWS];
    __shared__ int steps;

    auto st = [](float v) { return {{store}}; };

    // Wb and Rb of gate row j of direction d (zero without B).
    auto wb = [&](int d, int j) -> float { return {{wb}}; };
    auto rb = [&](int d, int j) -> float { return {{rb}}; };

    // x_t . W[row] (x_t at X offset xo; `row` counts the rows of every direction).
    auto xdot = [&](int xo, int row) -> float {
        float s = 0.0f;
        for (int k = 0; k < IN; ++k) {
            s = s + gopt_ld(x[xo + k]) * gopt_ld(w[row * IN + k]);
        }
        return s;
    };

    // h . R[row].
    auto hdot = [&](int row) -> float {
        float s = 0.0f;
        for (int k = 0; k < HID; ++k) {
            s = s + h[k] * gopt_ld(r[row * HID + k]);
        }
        return s;
    };

{{acts}}{{cell}}
    const int tid = threadIdx.x;
    const int d = blockIdx.x / {{batch}};
    const int b = blockIdx.x % {{batch}};
    const bool rev = d == 1 || {{reverse}};
    if (tid == 0) {
{{len}}    }
    __syncthreads();
    const int n = steps;
    const int so = d * {{sd}} + b * {{sb}};
    for (int j = tid; j < HID; j += THREADS) {
        h[j] = {{h0}};
{{c0}}    }
    for (int e = tid; e < (SEQ - n) * HID; e += THREADS) {
        y[(n + e / HID) * {{yt}} + d * {{yd}} + b * {{yb}} + e % HID] = st(0.0f);
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) {
        const int t = rev ? n - 1 - i : i;
        step(d, tid, t * {{xt}} + b * {{xb}}, t * {{yt}} + d * {{yd}} + b * {{yb}});
    }
{{last}}}
