"""Text: the canonical tokenizer, GPT-2's byte-level alphabet, and the datasets prepare-data writes.
Imports base only; knows nothing of the network."""
