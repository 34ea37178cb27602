// c_shims.cpp — the kernel library's definitions of c_shims.h's C functions, installed in libgpt_kernel_shims when
// the library loads: each takes the handles AOTInductor's wrapper holds, calls the operator's CPU kernel, and hands
// back the result as a new handle; an exception becomes AOTI_TORCH_FAILURE (the wrapper then throws, as for a
// failing torch shim), its message logged by torch's conversion macro.
#include "c_shims.h"

#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "cpu/decode_attention.h"
#include "cpu/linear.h"

namespace {

using torch::aot_inductor::new_tensor_handle;
using torch::aot_inductor::tensor_handle_to_tensor_pointer;

const at::Tensor &tensor(AtenTensorHandle handle) { return *tensor_handle_to_tensor_pointer(handle); }
at::Tensor &mutable_tensor(AtenTensorHandle handle) { return *tensor_handle_to_tensor_pointer(handle); }

// An optional tensor: a pointer to its handle, null for none.
std::optional<at::Tensor> optional_tensor(const AtenTensorHandle *handle) {
    return handle ? std::optional<at::Tensor>(tensor(*handle)) : std::nullopt;
}

namespace gk = gpt::kernels;

AOTITorchError linear(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE(
        { *ret0 = new_tensor_handle(gk::linear_cpu(tensor(x), tensor(weight), optional_tensor(bias))); });
}

AOTITorchError linear_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle *bias,
                             AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE(
        { *ret0 = new_tensor_handle(gk::linear_panels_cpu(tensor(x), tensor(weight), optional_tensor(bias))); });
}

AOTITorchError linear_int8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale, AtenTensorHandle *bias,
                           AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 = new_tensor_handle(gk::linear_int8_cpu(tensor(x), tensor(weight), tensor(scale), optional_tensor(bias)));
    });
}

AOTITorchError linear_int8_q8(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale,
                              AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 =
            new_tensor_handle(gk::linear_int8_q8_cpu(tensor(x), tensor(weight), tensor(scale), optional_tensor(bias)));
    });
}

AOTITorchError linear_int8_q8_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale,
                                     AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 = new_tensor_handle(
            gk::linear_int8_q8_panels_cpu(tensor(x), tensor(weight), tensor(scale), optional_tensor(bias)));
    });
}

AOTITorchError linear_int4(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale_zero, int64_t rows,
                           AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 = new_tensor_handle(
            gk::linear_int4_cpu(tensor(x), tensor(weight), tensor(scale_zero), rows, optional_tensor(bias)));
    });
}

AOTITorchError linear_int4_panels(AtenTensorHandle x, AtenTensorHandle weight, AtenTensorHandle scale_zero,
                                  int64_t rows, AtenTensorHandle *bias, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 = new_tensor_handle(
            gk::linear_int4_panels_cpu(tensor(x), tensor(weight), tensor(scale_zero), rows, optional_tensor(bias)));
    });
}

AOTITorchError decode_attention(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v, AtenTensorHandle k_cache,
                                AtenTensorHandle v_cache, AtenTensorHandle pos, double scale, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 = new_tensor_handle(gk::decode_attention_cpu(tensor(q), tensor(k), tensor(v), mutable_tensor(k_cache),
                                                           mutable_tensor(v_cache), tensor(pos), scale));
    });
}

AOTITorchError decode_attention_rows(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v,
                                     AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle pos,
                                     AtenTensorHandle seq, double scale, AtenTensorHandle *ret0) {
    AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
        *ret0 =
            new_tensor_handle(gk::decode_attention_rows_cpu(tensor(q), tensor(k), tensor(v), mutable_tensor(k_cache),
                                                            mutable_tensor(v_cache), tensor(pos), tensor(seq), scale));
    });
}

// Member by member: two of them share a type, and a list in the wrong order would still compile.
constexpr GptKernelShimTable definitions() {
    GptKernelShimTable shims{};
    shims.linear = linear;
    shims.linear_panels = linear_panels;
    shims.linear_int8 = linear_int8;
    shims.linear_int8_q8 = linear_int8_q8;
    shims.linear_int8_q8_panels = linear_int8_q8_panels;
    shims.linear_int4 = linear_int4;
    shims.linear_int4_panels = linear_int4_panels;
    shims.decode_attention = decode_attention;
    shims.decode_attention_rows = decode_attention_rows;
    return shims;
}
constexpr GptKernelShimTable table = definitions();

// Installed while this library is loaded: a graph's call reaches these definitions from the moment its operators
// are registered (registration.cpp, in the same library) until the library unloads.
struct Installation {
    Installation() noexcept { gpt_kernel_shims_install(&table); }
    ~Installation() { gpt_kernel_shims_install(nullptr); }
    Installation(const Installation &) = delete;
    Installation &operator=(const Installation &) = delete;
    Installation(Installation &&) = delete;
    Installation &operator=(Installation &&) = delete;
};
const Installation installation;

}  // namespace
