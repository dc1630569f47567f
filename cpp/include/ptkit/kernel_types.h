// Enumerations every backend's kernel interface shares, so that the op layers map
// tensors and strings to kernel arguments the same way.
#pragma once

#include <cstdint>

namespace ptkit {

// Order matches ptkit::op_support::float_dtype_index.
enum class DType : int32_t { f32 = 0, f16 = 1, bf16 = 2 };

// Order and names match ptkit_ops.ACTIVATIONS in Python and op_support::activation_index.
enum class Activation : int32_t { none = 0, relu = 1, gelu = 2, gelu_tanh = 3, silu = 4 };

}  // namespace ptkit
