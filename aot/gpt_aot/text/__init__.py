"""Text: the canonical tokenizer, GPT-2's byte-level alphabet, and the datasets prepare-data writes. May
import base/ only: model/ is its sibling, and neither knows the other."""
