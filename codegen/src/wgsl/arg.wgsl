{{enable}}// {{what}} along an axis of {{d}} elements ({{inner}} apart): one invocation per output
// element in a grid-stride loop; NaN is larger than every number and the first one
// wins (the reference's numpy order), ties go to the {{tie}} index.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{ot}}>;

{{helpers}}@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var o: u32 = gid.x; o < {{n}}u; o = o + stride) {
        let base = (o / {{inner}}u) * {{span}}u + o % {{inner}}u;
        var best = {{first}};
        var bnan = {{bnan}};
        var bi = 0u;
        for (var j: u32 = 1u; j < {{d}}u; j = j + 1u) {
            let v = {{load}};
            let vnan = {{vnan}};
            var take = false;
            if (bnan) {
                take = {{last}} && vnan;
            } else if (vnan) {
                take = true;
            } else {
                take = {{better}} || ({{last}} && {{equal}});
            }
            if (take) {
                best = v;
                bnan = vnan;
                bi = j;
            }
        }
{{write}}    }
}
