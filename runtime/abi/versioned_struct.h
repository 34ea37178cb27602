// versioned_struct.h — the ABI's growable structs (gpt_runtime.h, "Versioning"):
// fill only the bytes a caller's struct has, read a caller's params with the
// defaults for the fields its header did not know, and pin today's layouts so
// that changing one is a deliberate act (a new field goes at the end).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "gpt_runtime.h"

namespace gpt::c_api {

// Each versioned struct's name for messages and, for params, its defaults
// (default_params.cpp, the one place they are written down).
template <typename T>
struct Versioned;
#define GPT_VERSIONED_OUTPUT(type)                 \
    template <>                                    \
    struct Versioned<type> {                       \
        static constexpr const char *name = #type; \
    };
#define GPT_VERSIONED_PARAMS(type)                 \
    template <>                                    \
    struct Versioned<type> {                       \
        static constexpr const char *name = #type; \
        static type defaults();                    \
    };
GPT_VERSIONED_OUTPUT(gpt_model_info)
GPT_VERSIONED_OUTPUT(gpt_memory_stats)
GPT_VERSIONED_OUTPUT(gpt_trainer_state)
GPT_VERSIONED_PARAMS(gpt_model_params)
GPT_VERSIONED_PARAMS(gpt_generate_params)
GPT_VERSIONED_PARAMS(gpt_trainer_params)
GPT_VERSIONED_PARAMS(gpt_dist_params)
GPT_VERSIONED_PARAMS(gpt_sampler_params)
#undef GPT_VERSIONED_OUTPUT
#undef GPT_VERSIONED_PARAMS

// Writes `value` to `out`, but only its first `struct_size` bytes (the caller's
// sizeof), and sets out->struct_size to the bytes written.
template <typename T>
void fill_versioned(const T &value, T *out, size_t struct_size) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>, "a C struct");
    static_assert(offsetof(T, struct_size) == 0, "struct_size comes first");
    if (struct_size < sizeof(size_t))
        fail(GPT_ERR_INVALID_ARGUMENT, "struct_size " + std::to_string(struct_size) + " cannot hold struct " +
                                           Versioned<T>::name + ": pass sizeof the struct");
    T copy = value;
    copy.struct_size = std::min(struct_size, sizeof(T));
    std::memcpy(static_cast<void *>(out), &copy, copy.struct_size);
}

// The caller's params: what lies within params->struct_size, the defaults for
// the rest; the defaults alone for NULL params.
template <typename T>
T read_versioned(const T *params) {
    const T defaults = Versioned<T>::defaults();
    if (params == nullptr) return defaults;
    if (params->struct_size < sizeof(size_t) || params->struct_size > sizeof(T))
        fail(GPT_ERR_INVALID_ARGUMENT,
             std::string("struct ") + Versioned<T>::name + " has struct_size " + std::to_string(params->struct_size) +
                 "; this library knows " + std::to_string(sizeof(T)) + " bytes of it (ABI " +
                 std::to_string(GPT_RUNTIME_ABI_VERSION) +
                 "): make it with its *_default_params, or link the library the header came with");
    T p = defaults;
    std::memcpy(static_cast<void *>(&p), params, params->struct_size);
    p.struct_size = sizeof(T);
    return p;
}

// The layouts of ABI 3 on LP64 targets. A failing assert means a struct changed:
// add fields only at the end, then update its size here.
#if defined(__LP64__)
static_assert(sizeof(gpt_model_params) == 48);
static_assert(sizeof(gpt_model_info) == 120);
static_assert(sizeof(gpt_memory_stats) == 48);
static_assert(sizeof(gpt_generate_params) == 88);
static_assert(sizeof(gpt_sampler_params) == 56);
static_assert(sizeof(gpt_trainer_params) == 40);
static_assert(sizeof(gpt_trainer_state) == 24);
static_assert(sizeof(gpt_dist_params) == 40);
#endif

}  // namespace gpt::c_api
