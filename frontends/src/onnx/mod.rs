//! ONNX import: protobuf decoding (prost, no protoc), tensors, and graph conversion.

pub mod proto;
