/* plugin_load.c — libgpt_runtime opened as a plugin host opens it: dlopen with RTLD_LOCAL, every entry point
 * found with dlsym. An artifact whose graphs call the kernel library (its C shims, kernels/c_shims.h, bound by the
 * dynamic linker in the global scope) must load and match its golden vector all the same, and the library's loading
 * must put those C functions in the host's global scope and nothing of libtorch's: a library the host loads later
 * would bind to whatever is there (CTranslate2 ran its GEMMs on libtorch's MKL that way, and gave wrong tokens).
 * Usage: c_abi_plugin_load ARTIFACT_DIR LIBGPT_RUNTIME. Exit 0 only if every check holds. */
#include <dlfcn.h>
#include <stdio.h>

#include "gpt_runtime.h"

typedef gpt_status (*model_load_fn)(const char *, const struct gpt_model_params *, struct gpt_model **);
typedef gpt_status (*model_verify_fn)(const struct gpt_model *, double *);
typedef gpt_status (*model_free_fn)(struct gpt_model *);
typedef const char *(*last_error_fn)(void);

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ARTIFACT_DIR LIBGPT_RUNTIME\n", argv[0]);
        return 2;
    }
    void *library = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
        return 1;
    }
    /* POSIX's way from dlsym's object pointer to a function pointer. */
    model_load_fn model_load;
    model_verify_fn model_verify;
    model_free_fn model_free;
    last_error_fn last_error;
    *(void **)&model_load = dlsym(library, "gpt_model_load");
    *(void **)&model_verify = dlsym(library, "gpt_model_verify");
    *(void **)&model_free = dlsym(library, "gpt_model_free");
    *(void **)&last_error = dlsym(library, "gpt_runtime_last_error");
    if (!model_load || !model_verify || !model_free || !last_error) {
        fprintf(stderr, "an entry point is missing from %s\n", argv[2]);
        return 1;
    }
    struct gpt_model *model = NULL;
    if (model_load(argv[1], NULL, &model) != GPT_OK) {
        fprintf(stderr, "gpt_model_load: %s\n", last_error());
        return 1;
    }
    double max_abs_err = -1.0;
    const gpt_status verified = model_verify(model, &max_abs_err);
    printf("golden vector: largest difference %g\n", max_abs_err);
    if (verified != GPT_OK || !(max_abs_err >= 0.0)) {
        fprintf(stderr, "gpt_model_verify: %s\n", last_error());
        return 1;
    }
    model_free(model);

    /* dlopen(NULL): lookups in the global scope. */
    void *global_scope = dlopen(NULL, RTLD_NOW);
    if (global_scope == NULL || dlsym(global_scope, "aoti_torch_cpu_linear") == NULL) {
        fprintf(stderr, "the kernel library's C functions are not in the global scope\n");
        return 1;
    }
    static const char *const libtorch_symbols[] = {"aoti_torch_get_data_ptr", "sgemm_", "cblas_daxpy"};
    for (size_t i = 0; i < sizeof libtorch_symbols / sizeof libtorch_symbols[0]; ++i) {
        if (dlsym(global_scope, libtorch_symbols[i]) != NULL) {
            fprintf(stderr, "libtorch's %s is in the global scope\n", libtorch_symbols[i]);
            return 1;
        }
    }
    return 0;
}
