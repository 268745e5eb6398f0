{{enable}}// MaxUnpool in one workgroup: zero the output, then place the input 256 elements at a
// time, in order, each at the output position its index names. Within a batch the
// last of equal positions wins (each invocation looks at the later ones' slots); the
// batches run in order, so later elements overwrite earlier ones, as in the
// interpreter's sequential loop. An index outside the default-sized output raises
// the node's code in gopt_err and is skipped; a position the output shape cuts off is
// dropped.
{{bindings}}{{err}}

var<workgroup> slot: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    for (var i: u32 = t; i < {{total}}u; i = i + 256u) {
        out[i] = {{t}}();
    }
    storageBarrier();
    for (var base: u32 = 0u; base < {{len}}u; base = base + 256u) {
        let j = base + t;
        var at: u32 = 0xffffffffu;
        if (j < {{len}}u) {
{{load}}            if (f < 0i || f >= {{limit}}i) {
                atomicMax(&gopt_err, {{code}}u);
            } else {
{{place}}            }
        }
        slot[t] = at;
        workgroupBarrier();
        var last = at != 0xffffffffu;
        for (var u: u32 = t + 1u; u < 256u; u = u + 1u) {
            if (slot[u] == at) {
                last = false;
            }
        }
        if (last) {
            out[at] = x[j];
        }
        storageBarrier();
        workgroupBarrier();
    }
}
