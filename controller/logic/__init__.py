"""Pure controller decisions: no I/O, no clock, no randomness (see shared/style.md)."""
