// fuzz_check.h — what every fuzz target shares: a reader may refuse its input
// with gpt::Error (that is its job), but any other exception, a sanitizer report
// or a broken promise about what it accepted is a bug, and stops the fuzzer.
#pragma once

#include <cstdio>
#include <cstdlib>

// A property the reader promises for every input it accepts.
#define FUZZ_CHECK(condition)                                                                       \
    do {                                                                                            \
        if (!(condition)) {                                                                         \
            std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
            std::abort();                                                                           \
        }                                                                                           \
    } while (0)
