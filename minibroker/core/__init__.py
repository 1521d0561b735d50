"""Pure code shared by every program: types, errors, codecs. No I/O, no clocks, no randomness."""
