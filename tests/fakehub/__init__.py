"""A fake Hugging Face Hub on 127.0.0.1 and small real checkpoint files, for tests of any layer."""
