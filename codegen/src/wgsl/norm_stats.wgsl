{{enable}}// {{what}}: {{groups}} groups of {{len}} elements, one workgroup per group (looping
// over groups past the dispatch): the mean, then the second pass ({{second}}), each an
// f32 sum reduced through workgroup memory, then every element normalized.
{{bindings}}
var<workgroup> red: array<f32, 256>;

{{reduce_sum}}
// The offset of element j of a group from the group's first.
fn at(j: u32) -> u32 {
{{offset}}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    for (var grp: u32 = wid.x; grp < {{groups}}u; grp = grp + nwg.x) {
{{base}}        var s1: f32 = 0.0;
        for (var j: u32 = lid; j < {{len}}u; j = j + 256u) {
            s1 = s1 + f32(x[base + at(j)]);
        }
        let mean = reduce_sum(s1, lid) / {{len}}.0;
        var s2: f32 = 0.0;
        for (var j: u32 = lid; j < {{len}}u; j = j + 256u) {
            let v = f32(x[base + at(j)]);
{{accumulate}}        }
        let second = reduce_sum(s2, lid) / {{len}}.0;
{{prepare}}        for (var j: u32 = lid; j < {{len}}u; j = j + 256u) {
            let v = f32(x[base + at(j)]);
{{normalize}}        }
{{finish}}    }
}
