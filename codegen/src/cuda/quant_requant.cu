// rint(c * m + z), ties to even, saturated to [lo, hi]: the product and the sum in
// double, rounded once each as the reference's f64 (the product is exact below 2^29);
// NaN is 0.
static __device__ __forceinline__ int {{name}}_requant(int c, float m, int z, int lo, int hi) {
    const double v = __dadd_rn(__dmul_rn((double)c, (double)m), (double)z);
    if (v != v) return 0;
    const double r = rint(v);
    return r < (double)lo ? lo : (r > (double)hi ? hi : (int)r);
}
