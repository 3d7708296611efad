"""Measurement harness: peak live tensor bytes of real transformers models, without a GPU."""
