"""The network: nanoGPT's GPT, its attention kernels, its linear forms and their quantized weights, and the
named configurations. May import base/ only: it knows nothing of tokenizers, artifacts or the compiler."""
