"""Files other tools wrote: nanoGPT and Hugging Face checkpoints, runtime checkpoints back to nanoGPT's
format, and tokenizers in tiktoken's, Hugging Face's or nanoGPT's formats. Imports base, model, text and
artifact; never the compiler."""
