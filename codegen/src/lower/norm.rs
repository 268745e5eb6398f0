//! BatchNormalization, InstanceNormalization, GroupNormalization, LRN, MeanVarianceNormalization, read once for every backend (not written yet: the writers refuse it).
