"""Helpers that know nothing of models: files and directories replaced whole. The bottom layer: imports
no other subpackage, and every one above may import it."""
