"""A partition's on-disk log: segments, their offset index, recovery and checkpoint files."""
