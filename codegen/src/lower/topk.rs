//! TopK, read once for every backend (not written yet: the writers refuse it).
