//! Resize (every mode of ONNX Resize/Upsample), read once for every backend (not written yet: the writers refuse it).
