// {{what}} ({{reduction}}) over {{m}} targets of {{c}} classes ({{d}} positions per
// sample): each target's loss in f32, {{how}}; a target equal to ignore_index weighs 0,
// one that is not a class raises the node's code in gopt_err and weighs 0.
extern "C" __global__ void __launch_bounds__(256) {{name}}({{params}}) {
    const long long m = {{m}}LL;
    float ls = 0.0f, ws = 0.0f;
    for (long long i = {{start}}; i < m; i += {{step}}) {
        const long long base = (i / {{d}}LL) * {{cd}}LL + i % {{d}}LL;
{{prep}}        const long long t = (long long)tgt[i];
        float loss = 0.0f, w = 0.0f;
        if (!({{ignored}})) {
            if (t < 0 || t >= {{c}}LL) {
                atomicMax(gopt_err, {{code}}u);
            } else {
                w = {{weight}};
                loss = -({{xk}}) * w;
            }
        }
{{each}}        ls += loss;
        ws += w;
    }
{{finish}}}
