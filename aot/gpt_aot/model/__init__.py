"""The network: nanoGPT's GPT, its attention kernels, its linear forms and their quantized weights, and the
named configurations. Imports base only; knows nothing of tokenizers, artifacts or the compiler."""
