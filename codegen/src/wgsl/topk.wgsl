{{enable}}// TopK ({{what}} {{k}} of {{d}} elements {{inner}} apart along the axis): one invocation
// per data element (grid-stride) counts the elements of its lane that come before it
// (NaN above every number, equal values by the lower index), stopping at k, and,
// ranked below k, stores itself and its index (i64 words) at its rank.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> values: array<{{t}}>;
@group(0) @binding(2) var<storage, read_write> indices: array<vec2<u32>>;

{{helpers}}fn before(a: {{ct}}, b: {{ct}}) -> bool {
    return {{before}};
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i: u32 = gid.x; i < {{n}}u; i = i + stride) {
        let p = (i / {{inner}}u) % {{d}}u;
        let base = i - p * {{inner}}u;
        let v = {{load_v}};
        var rank = 0u;
        for (var j: u32 = 0u; j < {{d}}u; j = j + 1u) {
            let w = {{load_w}};
            if (before(w, v) || (j < p && !before(v, w))) {
                rank = rank + 1u;
                if (rank >= {{k}}u) {
                    break;
                }
            }
        }
        if (rank < {{k}}u) {
            let at = ((i / {{span}}u) * {{k}}u + rank) * {{inner}}u + i % {{inner}}u;
            values[at] = x[i];
            indices[at] = vec2<u32>(p, 0u);
        }
    }
}
