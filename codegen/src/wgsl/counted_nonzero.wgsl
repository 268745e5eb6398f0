{{enable}}// NonZero of {{n}} elements (dims {{dims}}): one workgroup of 256 invocations walks the
// data in chunks of 256, flags the nonzero elements, scans the flags in workgroup memory
// (Hillis-Steele) and stores each flagged element's coordinates (i64 words) at its
// rank, column `rank` of the [{{rank}}, {{bound}}] output. Invocation 0 writes the count
// to status word {{slot}}; the runtime keeps that many columns.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> y: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;

var<workgroup> scan: array<u32, 256>;
{{scan_init}}    for (var start: u32 = 0u; start < {{n}}u; start = start + 256u) {
        let i = start + t;
        var f = 0u;
        if (i < {{n}}u) {
            if ({{nonzero}}) {
                f = 1u;
            }
        }
{{scan_step}}        if (f == 1u) {
            let pos = base + scan[t] - 1u;
            var r = i;
{{coords}}        }
        workgroupBarrier();
        if (t == 255u) {
            base = base + scan[255];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        status[{{slot}}] = base;
    }
}
