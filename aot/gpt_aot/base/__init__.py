"""Helpers every layer may use, and that know nothing of models: files replaced whole."""
