    __shared__ unsigned int base;
    const unsigned int t = threadIdx.x;
    if (t == 0) {
        base = 0u;
    }
    __syncthreads();
