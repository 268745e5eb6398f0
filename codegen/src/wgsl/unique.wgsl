{{enable}}// Unique of {{d}} slices of {{outer}} × {{inner}} elements (the slices along the axis,
// or the elements of the flattened data), compared lexicographically (NaN after every
// number, all NaNs equal), the unique ones {{order}}. One workgroup of 256
// invocations: phase 1 flags, one invocation per slice, the slices no earlier slice
// equals (first occurrences) in a bitmask in workgroup memory; phase 2 gives each slice
// the rank of its group ({{rank_what}}), and each first occurrence stores its slice of
// Y, its index and its group's size at that rank. Invocation 0 counts the flags into
// the status words of the counted outputs; the runtime keeps that many.
@group(0) @binding(0) var<storage, read> x: array<{{t}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{t}}>;
{{bindings}}
var<workgroup> flags: array<atomic<u32>, {{words}}>;

{{helpers}}// Elements a and b compared: -1, 0 or 1.
fn cmp_elem(a: {{t}}, b: {{t}}) -> i32 {
{{cmp}}
}

// Slices a and b compared lexicographically (outer, then inner order): -1, 0 or 1.
fn cmp_slices(a: u32, b: u32) -> i32 {
{{cmp_slices}}    return 0;
}

// Whether slice i is the first occurrence of its group (after phase 1).
fn is_first(i: u32) -> bool {
    return ((atomicLoad(&flags[i >> 5u]) >> (i & 31u)) & 1u) == 1u;
}

// The rank of slice i's group in Y.
fn rank_of(i: u32) -> u32 {
    var rank = 0u;
{{rank}}
    return rank;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    for (var w: u32 = t; w < {{words}}u; w = w + 256u) {
        atomicStore(&flags[w], 0u);
    }
    workgroupBarrier();
    for (var i: u32 = t; i < {{d}}u; i = i + 256u) {
        var f = true;
        for (var j: u32 = 0u; j < i; j = j + 1u) {
            if (cmp_slices(j, i) == 0) {
                f = false;
                break;
            }
        }
        if (f) {
            atomicOr(&flags[i >> 5u], 1u << (i & 31u));
        }
    }
    workgroupBarrier();
    for (var i: u32 = t; i < {{d}}u; i = i + 256u) {
        let rank = rank_of(i);
        if (is_first(i)) {
{{copy}}{{store_first}}        }
{{store_inverse}}    }
    if (t == 0u) {
        var total = 0u;
        for (var w: u32 = 0u; w < {{words}}u; w = w + 1u) {
            total = total + countOneBits(atomicLoad(&flags[w]));
        }
{{store_counts}}    }
}
