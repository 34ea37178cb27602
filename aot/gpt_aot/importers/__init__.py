"""Files other tools wrote: nanoGPT and Hugging Face checkpoints, runtime checkpoints back to nanoGPT's
format, and tokenizers in nanoGPT's, GPT-2's, Hugging Face's or tiktoken's formats. May import base/,
model/, text/ and artifact/; compiler/ is its sibling: the compile takes a model and a tokenizer, not the
files they came from."""
