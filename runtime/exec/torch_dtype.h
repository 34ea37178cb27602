// torch_dtype.h — torch's ScalarType for each entry of the dtype table
// (formats/dtype.h), and the entry for a ScalarType.
#pragma once

#include <c10/core/ScalarType.h>

#include "formats/dtype.h"

namespace gpt {

c10::ScalarType scalar_type(const Dtype &dtype);
// nullptr for a ScalarType the table lacks.
const Dtype *dtype_of(c10::ScalarType type);

}  // namespace gpt
