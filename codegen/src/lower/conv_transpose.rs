//! ConvTranspose, Col2Im, MaxUnpool, DeformConv, read once for every backend (not written yet: the writers refuse it).
