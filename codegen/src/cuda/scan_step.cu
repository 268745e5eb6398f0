        scan[t] = f;
        __syncthreads();
        for (unsigned int off = 1u; off < 1024u; off <<= 1) {
            const unsigned int v = t >= off ? scan[t - off] : 0u;
            __syncthreads();
            scan[t] += v;
            __syncthreads();
        }
