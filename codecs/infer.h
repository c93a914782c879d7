#pragma once

// The canonical inference request and response. Every codec decodes into these and
// encodes from them; the pipeline routes, rewrites and forwards them.
//
// Tensor bytes are always held in their binary wire form (PROTOCOL.md section 6): little-
// endian, row-major; BOOL one byte; BYTES elements each a 4-byte little-endian length then
// the bytes. That is the form of HTTP binary blobs and of gRPC raw contents, so passing a
// tensor between them is a Buffer copy (a reference count), not a byte copy. JSON `data`
// and typed gRPC `contents` are converted to and from it at the edge.
//
// Encoding-only keys are lifted out of the parameter maps into fields: a tensor's
// binary_data_size is derived when encoding, its shared_memory_* keys become
// SharedMemoryRef, an output's binary_data / classification become fields, and the
// request's binary_data_output becomes a field. Every other parameter is kept as sent.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/buffer.h"
#include "codecs/data_type.h"
#include "codecs/parameters.h"
#include "codecs/shape.h"

namespace infergate::codecs {

// A reference into a registered shared-memory region, by name; resolved by shm/.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  bool operator==(const SharedMemoryRef&) const = default;
};

struct InferInput {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;
  Parameters parameters;
  std::optional<SharedMemoryRef> shared_memory;  // set: the data lives there, `data` is empty
  Buffer data;
  bool operator==(const InferInput&) const = default;
};

struct RequestedOutput {
  std::string name;
  std::optional<bool> binary_data;  // HTTP only; unset: the request's binary_data_output
  uint64_t classification = 0;      // top-N classification; 0 = off
  std::optional<SharedMemoryRef> shared_memory;
  Parameters parameters;  // any other keys the client sent
  bool operator==(const RequestedOutput&) const = default;
};

struct InferRequest {
  std::string model_name;
  std::string model_version;  // "" = latest
  std::string id;
  Parameters parameters;
  std::optional<bool> binary_data_output;  // HTTP only
  std::vector<InferInput> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output of the model

  const InferInput* findInput(std::string_view name) const;
  const RequestedOutput* findOutput(std::string_view name) const;
  bool operator==(const InferRequest&) const = default;
};

struct InferOutput {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;
  Parameters parameters;
  std::optional<SharedMemoryRef> shared_memory;  // written to shm: no data travels
  Buffer data;
  bool operator==(const InferOutput&) const = default;
};

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  Parameters parameters;
  std::vector<InferOutput> outputs;

  const InferOutput* findOutput(std::string_view name) const;
  bool operator==(const InferResponse&) const = default;
};

// Checks that `data` holds exactly the bytes `shape` and `datatype` call for: the byte
// size of a fixed-size type, or for BYTES exactly elementCount length-prefixed elements
// with nothing left over. Errors are INVALID_ARGUMENT naming `tensor`.
Status validateTensorData(std::string_view tensor, DataType datatype, const Shape& shape,
                          const Buffer& data);

}  // namespace infergate::codecs
