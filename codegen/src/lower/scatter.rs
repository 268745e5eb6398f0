//! ScatterND, ScatterElements, Scatter, TensorScatter, read once for every backend (not written yet: the writers refuse it).
