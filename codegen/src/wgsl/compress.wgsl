{{enable}}// Compress: x viewed as {{outer}} x {{d}} x {{inner}} around the axis, the slices whose
// entry of the {{len}}-long condition is true kept in order, the output laid out at its
// bound {{bound}} along the axis. One workgroup of 256 invocations walks the condition
// in chunks of 256, flags the true entries inside the axis, scans the flags in
// workgroup memory (Hillis-Steele), lists the chunk's flagged slices at their ranks in
// `sel`, and then copies them together, one element per invocation at a time, to
// output positions `base + rank`. A true entry past the axis raises the node's code in
// status word 0. Invocation 0 writes the count to status word {{slot}}; the runtime
// keeps that many slices.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<{{t}}>;
@group(0) @binding(3) var<storage, read_write> status: array<atomic<u32>>;

var<workgroup> scan: array<u32, 256>;
var<workgroup> sel: array<u32, 256>;
{{scan_init}}    for (var start: u32 = 0u; start < {{len}}u; start = start + 256u) {
        let j = start + t;
        var f = 0u;
        if (j < {{len}}u) {
            if (cond[j] != 0u) {
                if (j < {{d}}u) {
                    f = 1u;
                } else {
{{raise}}                }
            }
        }
{{scan_step}}        if (f == 1u) {
            sel[scan[t] - 1u] = j;
        }
        workgroupBarrier();
        let c = scan[255];
        let b = base;
        for (var e: u32 = t; e < c * {{slice}}u; e = e + 256u) {
            let q = e % {{inner}}u;
            let rest = e / {{inner}}u;
            let r = rest % c;
            let o = rest / c;
            y[(o * {{bound}}u + b + r) * {{inner}}u + q] = x[(o * {{d}}u + sel[r]) * {{inner}}u + q];
        }
        workgroupBarrier();
        if (t == 255u) {
            base = base + c;
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        atomicStore(&status[{{slot}}], base);
    }
}
