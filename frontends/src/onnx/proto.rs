//! ONNX protobuf schema as hand-written `prost` derive structs.
//!
//! This mirrors `onnx.proto` (proto2, package `onnx`) as shipped with onnx
//! 1.23.2, so that no `protoc` binary or build script is needed to read
//! `.onnx` models and `.pb` tensor files. The layout follows what
//! `prost-build` would generate: nested messages, enums and oneofs live in a
//! module named after the parent message in snake_case (e.g.
//! [`type_proto::Tensor`], [`tensor_proto::DataType`]), proto2 `optional`
//! scalars are `Option<T>`, and fields that are recursive through a
//! non-repeated path are boxed.
//!
//! Field numbers, wire types and `[packed = true]` markers must match
//! `onnx.proto` exactly; anything else silently corrupts decoding. When
//! updating, diff against the `onnx.proto` of the target onnx release.

// Field-level docs live in onnx.proto; documenting every field here would
// only duplicate it.
#![allow(missing_docs)]

// ---------------------------------------------------------------------------
// Top-level enums
// ---------------------------------------------------------------------------

/// IR versions. `IrVersion` is the current (newest) version known to the
/// schema this file mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Version {
    /// Proto3 requires the first enum value to be zero.
    StartVersion = 0,
    IrVersion20171010 = 1,
    IrVersion20171030 = 2,
    IrVersion2017113 = 3,
    IrVersion2019122 = 4,
    IrVersion2019318 = 5,
    IrVersion2019919 = 6,
    IrVersion202058 = 7,
    IrVersion2021730 = 8,
    IrVersion202355 = 9,
    IrVersion2024325 = 10,
    IrVersion20250512 = 11,
    IrVersion20250826 = 12,
    IrVersion20251106 = 13,
    IrVersion = 14,
}

impl Version {
    /// Name of the value as written in `onnx.proto`.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            Self::StartVersion => "_START_VERSION",
            Self::IrVersion20171010 => "IR_VERSION_2017_10_10",
            Self::IrVersion20171030 => "IR_VERSION_2017_10_30",
            Self::IrVersion2017113 => "IR_VERSION_2017_11_3",
            Self::IrVersion2019122 => "IR_VERSION_2019_1_22",
            Self::IrVersion2019318 => "IR_VERSION_2019_3_18",
            Self::IrVersion2019919 => "IR_VERSION_2019_9_19",
            Self::IrVersion202058 => "IR_VERSION_2020_5_8",
            Self::IrVersion2021730 => "IR_VERSION_2021_7_30",
            Self::IrVersion202355 => "IR_VERSION_2023_5_5",
            Self::IrVersion2024325 => "IR_VERSION_2024_3_25",
            Self::IrVersion20250512 => "IR_VERSION_2025_05_12",
            Self::IrVersion20250826 => "IR_VERSION_2025_08_26",
            Self::IrVersion20251106 => "IR_VERSION_2025_11_06",
            Self::IrVersion => "IR_VERSION",
        }
    }
}

/// Operator status (kept for schema completeness; unused by current IR).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum OperatorStatus {
    Experimental = 0,
    Stable = 1,
}

impl OperatorStatus {
    /// Name of the value as written in `onnx.proto`.
    pub fn as_str_name(&self) -> &'static str {
        match self {
            Self::Experimental => "EXPERIMENTAL",
            Self::Stable => "STABLE",
        }
    }
}

// ---------------------------------------------------------------------------
// AttributeProto
// ---------------------------------------------------------------------------

/// A named attribute of a node or function. Exactly one value field is set;
/// `type` is the discriminator.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// Attribute name (unique within the node).
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// In a function body: name of the function attribute this refers to.
    #[prost(string, optional, tag = "21")]
    pub ref_attr_name: Option<String>,
    #[prost(string, optional, tag = "13")]
    pub doc_string: Option<String>,
    /// Discriminator; see [`attribute_proto::AttributeType`].
    #[prost(enumeration = "attribute_proto::AttributeType", optional, tag = "20")]
    pub r#type: Option<i32>,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    /// UTF-8 string payload (kept as bytes, as in the schema).
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(message, optional, tag = "6")]
    pub g: Option<GraphProto>,
    #[prost(message, optional, tag = "22")]
    pub sparse_tensor: Option<SparseTensorProto>,
    #[prost(message, optional, tag = "14")]
    pub tp: Option<TypeProto>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub graphs: Vec<GraphProto>,
    #[prost(message, repeated, tag = "23")]
    pub sparse_tensors: Vec<SparseTensorProto>,
    #[prost(message, repeated, tag = "15")]
    pub type_protos: Vec<TypeProto>,
}

/// Nested types of [`AttributeProto`].
pub mod attribute_proto {
    /// Which value field of an [`AttributeProto`](super::AttributeProto) is in use.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum AttributeType {
        Undefined = 0,
        Float = 1,
        Int = 2,
        String = 3,
        Tensor = 4,
        Graph = 5,
        SparseTensor = 11,
        TypeProto = 13,
        Floats = 6,
        Ints = 7,
        Strings = 8,
        Tensors = 9,
        Graphs = 10,
        SparseTensors = 12,
        TypeProtos = 14,
    }

    impl AttributeType {
        /// Name of the value as written in `onnx.proto`.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Undefined => "UNDEFINED",
                Self::Float => "FLOAT",
                Self::Int => "INT",
                Self::String => "STRING",
                Self::Tensor => "TENSOR",
                Self::Graph => "GRAPH",
                Self::SparseTensor => "SPARSE_TENSOR",
                Self::TypeProto => "TYPE_PROTO",
                Self::Floats => "FLOATS",
                Self::Ints => "INTS",
                Self::Strings => "STRINGS",
                Self::Tensors => "TENSORS",
                Self::Graphs => "GRAPHS",
                Self::SparseTensors => "SPARSE_TENSORS",
                Self::TypeProtos => "TYPE_PROTOS",
            }
        }
    }
}

// ---------------------------------------------------------------------------
// ValueInfoProto, NodeProto
// ---------------------------------------------------------------------------

/// Name and type of a graph input, output or intermediate value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    #[prost(string, optional, tag = "3")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// One operator invocation in a graph.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Input value names; an empty string marks an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: Option<String>,
    /// Operator domain; empty or absent means the default ONNX domain.
    #[prost(string, optional, tag = "7")]
    pub domain: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub overload: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "9")]
    pub metadata_props: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "10")]
    pub device_configurations: Vec<NodeDeviceConfigurationProto>,
}

// ---------------------------------------------------------------------------
// Multi-device / sharding
// ---------------------------------------------------------------------------

/// `int64 -> repeated int64` map entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IntIntListEntryProto {
    #[prost(int64, optional, tag = "1")]
    pub key: Option<i64>,
    #[prost(int64, repeated, packed = "false", tag = "2")]
    pub value: Vec<i64>,
}

/// Multi-device configuration of a node.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeDeviceConfigurationProto {
    #[prost(string, optional, tag = "1")]
    pub configuration_id: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub sharding_spec: Vec<ShardingSpecProto>,
    #[prost(int32, optional, tag = "3")]
    pub pipeline_stage: Option<i32>,
}

/// How one tensor is sharded across devices.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShardingSpecProto {
    #[prost(string, optional, tag = "1")]
    pub tensor_name: Option<String>,
    #[prost(int64, repeated, packed = "false", tag = "2")]
    pub device: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub index_to_device_group_map: Vec<IntIntListEntryProto>,
    #[prost(message, repeated, tag = "4")]
    pub sharded_dim: Vec<ShardedDimProto>,
}

/// Sharding of one tensor axis.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShardedDimProto {
    #[prost(int64, optional, tag = "1")]
    pub axis: Option<i64>,
    #[prost(message, repeated, tag = "2")]
    pub simple_sharding: Vec<SimpleShardedDimProto>,
}

/// One level of simple (even) sharding of an axis.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SimpleShardedDimProto {
    #[prost(int64, optional, tag = "3")]
    pub num_shards: Option<i64>,
    #[prost(oneof = "simple_sharded_dim_proto::Dim", tags = "1, 2")]
    pub dim: Option<simple_sharded_dim_proto::Dim>,
}

/// Nested types of [`SimpleShardedDimProto`].
pub mod simple_sharded_dim_proto {
    /// Size of the sharded dimension: concrete or symbolic.
    #[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
    pub enum Dim {
        #[prost(int64, tag = "1")]
        DimValue(i64),
        #[prost(string, tag = "2")]
        DimParam(String),
    }
}

// ---------------------------------------------------------------------------
// Training, model
// ---------------------------------------------------------------------------

/// Training information (initialization and one training step).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrainingInfoProto {
    #[prost(message, optional, tag = "1")]
    pub initialization: Option<GraphProto>,
    #[prost(message, optional, tag = "2")]
    pub algorithm: Option<GraphProto>,
    #[prost(message, repeated, tag = "3")]
    pub initialization_binding: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "4")]
    pub update_binding: Vec<StringStringEntryProto>,
}

/// Top-level container: a `.onnx` file is one encoded `ModelProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: Option<i64>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub producer_version: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "5")]
    pub model_version: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
    #[prost(message, repeated, tag = "20")]
    pub training_info: Vec<TrainingInfoProto>,
    #[prost(message, repeated, tag = "25")]
    pub functions: Vec<FunctionProto>,
    #[prost(message, repeated, tag = "26")]
    pub configuration: Vec<DeviceConfigurationProto>,
}

/// A named multi-device configuration.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceConfigurationProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub num_devices: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub device: Vec<String>,
}

/// `string -> string` map entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

/// Quantization annotation of one tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorAnnotation {
    #[prost(string, optional, tag = "1")]
    pub tensor_name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub quant_parameter_tensor_names: Vec<StringStringEntryProto>,
}

// ---------------------------------------------------------------------------
// GraphProto
// ---------------------------------------------------------------------------

/// A computation graph: nodes in topological order plus inputs, outputs and
/// initializers. Tags 3, 4, 6..=9 are reserved.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "15")]
    pub sparse_initializer: Vec<SparseTensorProto>,
    #[prost(string, optional, tag = "10")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "14")]
    pub quantization_annotation: Vec<TensorAnnotation>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

// ---------------------------------------------------------------------------
// TensorProto
// ---------------------------------------------------------------------------

/// A (dense) tensor value. Data lives in exactly one of `raw_data` (little
/// endian), the typed `*_data` fields, or external storage.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    /// A [`tensor_proto::DataType`] value (declared `int32` in the schema).
    #[prost(int32, optional, tag = "2")]
    pub data_type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub segment: Option<tensor_proto::Segment>,
    #[prost(float, repeated, packed = "true", tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, packed = "true", tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, packed = "true", tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "12")]
    pub doc_string: Option<String>,
    /// Shared bytes: decoding from a memory-mapped file slices it, copying nothing.
    #[prost(bytes = "bytes", optional, tag = "9")]
    pub raw_data: Option<bytes::Bytes>,
    /// Keys: `location`, `offset`, `length`, `checksum`.
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    #[prost(enumeration = "tensor_proto::DataLocation", optional, tag = "14")]
    pub data_location: Option<i32>,
    #[prost(double, repeated, packed = "true", tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(uint64, repeated, packed = "true", tag = "11")]
    pub uint64_data: Vec<u64>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// Nested types of [`TensorProto`].
pub mod tensor_proto {
    /// Element types of tensors.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum DataType {
        Undefined = 0,
        Float = 1,
        Uint8 = 2,
        Int8 = 3,
        Uint16 = 4,
        Int16 = 5,
        Int32 = 6,
        Int64 = 7,
        String = 8,
        Bool = 9,
        Float16 = 10,
        Double = 11,
        Uint32 = 12,
        Uint64 = 13,
        Complex64 = 14,
        Complex128 = 15,
        Bfloat16 = 16,
        Float8e4m3fn = 17,
        Float8e4m3fnuz = 18,
        Float8e5m2 = 19,
        Float8e5m2fnuz = 20,
        Uint4 = 21,
        Int4 = 22,
        Float4e2m1 = 23,
        Float8e8m0 = 24,
        Uint2 = 25,
        Int2 = 26,
        Float6e2m3 = 27,
        Float6e3m2 = 28,
    }

    impl DataType {
        /// Name of the value as written in `onnx.proto`.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Undefined => "UNDEFINED",
                Self::Float => "FLOAT",
                Self::Uint8 => "UINT8",
                Self::Int8 => "INT8",
                Self::Uint16 => "UINT16",
                Self::Int16 => "INT16",
                Self::Int32 => "INT32",
                Self::Int64 => "INT64",
                Self::String => "STRING",
                Self::Bool => "BOOL",
                Self::Float16 => "FLOAT16",
                Self::Double => "DOUBLE",
                Self::Uint32 => "UINT32",
                Self::Uint64 => "UINT64",
                Self::Complex64 => "COMPLEX64",
                Self::Complex128 => "COMPLEX128",
                Self::Bfloat16 => "BFLOAT16",
                Self::Float8e4m3fn => "FLOAT8E4M3FN",
                Self::Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
                Self::Float8e5m2 => "FLOAT8E5M2",
                Self::Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
                Self::Uint4 => "UINT4",
                Self::Int4 => "INT4",
                Self::Float4e2m1 => "FLOAT4E2M1",
                Self::Float8e8m0 => "FLOAT8E8M0",
                Self::Uint2 => "UINT2",
                Self::Int2 => "INT2",
                Self::Float6e2m3 => "FLOAT6E2M3",
                Self::Float6e3m2 => "FLOAT6E3M2",
            }
        }
    }

    /// A chunk of a large tensor split across several `TensorProto`s.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
    pub struct Segment {
        #[prost(int64, optional, tag = "1")]
        pub begin: Option<i64>,
        #[prost(int64, optional, tag = "2")]
        pub end: Option<i64>,
    }

    /// Where the tensor's data is stored.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum DataLocation {
        /// Inline, in `raw_data` or the typed `*_data` fields.
        Default = 0,
        /// In an external file described by `external_data`.
        External = 1,
    }

    impl DataLocation {
        /// Name of the value as written in `onnx.proto`.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Default => "DEFAULT",
                Self::External => "EXTERNAL",
            }
        }
    }
}

/// A sparse tensor in COO format.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SparseTensorProto {
    /// Non-default values, a 1-D tensor of length NNZ.
    #[prost(message, optional, tag = "1")]
    pub values: Option<TensorProto>,
    /// Indices: `[NNZ, rank]` or linearized `[NNZ]`, int64.
    #[prost(message, optional, tag = "2")]
    pub indices: Option<TensorProto>,
    /// Shape of the dense tensor.
    #[prost(int64, repeated, packed = "false", tag = "3")]
    pub dims: Vec<i64>,
}

// ---------------------------------------------------------------------------
// Shapes and types
// ---------------------------------------------------------------------------

/// A tensor shape; each dimension is a constant, a symbol, or unknown.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<tensor_shape_proto::Dimension>,
}

/// Nested types of [`TensorShapeProto`].
pub mod tensor_shape_proto {
    /// One dimension of a shape. `value == None` means unknown.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        #[prost(string, optional, tag = "3")]
        pub denotation: Option<String>,
        #[prost(oneof = "dimension::Value", tags = "1, 2")]
        pub value: Option<dimension::Value>,
    }

    /// Nested types of [`Dimension`].
    pub mod dimension {
        /// Concrete size or symbolic name of a dimension.
        #[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
        pub enum Value {
            #[prost(int64, tag = "1")]
            DimValue(i64),
            #[prost(string, tag = "2")]
            DimParam(String),
        }
    }
}

/// The type of a value: tensor, sequence, map, optional, sparse tensor or
/// opaque.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    #[prost(string, optional, tag = "6")]
    pub denotation: Option<String>,
    #[prost(oneof = "type_proto::Value", tags = "1, 4, 5, 9, 8, 7")]
    pub value: Option<type_proto::Value>,
}

/// Nested types of [`TypeProto`].
pub mod type_proto {
    /// Dense tensor type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// A [`DataType`](super::tensor_proto::DataType) value.
        #[prost(int32, optional, tag = "1")]
        pub elem_type: Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<super::TensorShapeProto>,
    }

    /// Homogeneous sequence type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sequence {
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<super::TypeProto>>,
    }

    /// Map type; keys are an integral or string `DataType`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Map {
        #[prost(int32, optional, tag = "1")]
        pub key_type: Option<i32>,
        #[prost(message, optional, boxed, tag = "2")]
        pub value_type: Option<Box<super::TypeProto>>,
    }

    /// Optional (possibly absent) value type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Optional {
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<super::TypeProto>>,
    }

    /// Sparse tensor type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SparseTensor {
        #[prost(int32, optional, tag = "1")]
        pub elem_type: Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<super::TensorShapeProto>,
    }

    /// Opaque type identified by domain and name. Tag 3 is reserved.
    #[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
    pub struct Opaque {
        #[prost(string, optional, tag = "1")]
        pub domain: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
    }

    /// The kind of type. Variants that recurse into `TypeProto` are boxed,
    /// as `prost-build` does.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(message, tag = "1")]
        TensorType(Tensor),
        #[prost(message, tag = "4")]
        SequenceType(Box<Sequence>),
        #[prost(message, tag = "5")]
        MapType(Box<Map>),
        #[prost(message, tag = "9")]
        OptionalType(Box<Optional>),
        #[prost(message, tag = "8")]
        SparseTensorType(SparseTensor),
        #[prost(message, tag = "7")]
        OpaqueType(Opaque),
    }
}

// ---------------------------------------------------------------------------
// Operator sets and functions
// ---------------------------------------------------------------------------

/// An (operator-set domain, version) pair a model or function imports.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct OperatorSetIdProto {
    /// Empty or absent means the default ONNX domain (`ai.onnx`).
    #[prost(string, optional, tag = "1")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub version: Option<i64>,
}

/// A model-local function, callable by nodes with matching
/// `(domain, op_type, overload)`. Tags 2 and 3 are reserved.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, repeated, tag = "4")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub output: Vec<String>,
    /// Names of attributes without default values.
    #[prost(string, repeated, tag = "6")]
    pub attribute: Vec<String>,
    /// Attributes with default values.
    #[prost(message, repeated, tag = "11")]
    pub attribute_proto: Vec<AttributeProto>,
    #[prost(message, repeated, tag = "7")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "8")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "9")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, optional, tag = "10")]
    pub domain: Option<String>,
    #[prost(string, optional, tag = "13")]
    pub overload: Option<String>,
    #[prost(message, repeated, tag = "12")]
    pub value_info: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}
