"""Bundled data: model catalog, GPU catalog, icons, desktop metadata."""
