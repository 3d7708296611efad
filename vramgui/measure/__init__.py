"""Measured memory of real transformers models (the `measure` extra: torch, transformers, peft)."""
