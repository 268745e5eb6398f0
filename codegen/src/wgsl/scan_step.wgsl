        scan[t] = f;
        workgroupBarrier();
        for (var off: u32 = 1u; off < 256u; off = off << 1u) {
            var v = 0u;
            if (t >= off) {
                v = scan[t - off];
            }
            workgroupBarrier();
            scan[t] = scan[t] + v;
            workgroupBarrier();
        }
