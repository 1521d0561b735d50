"""The seeded simulation: brokers' real partition rules, real logs on memory stores and the
controller's real decision functions, driven by a simulated clock, network and ZooKeeper.

One seed is one whole cluster run; the invariants are checked after every event. Replay a
seed with `python -m tests.sim --seed N` (README.md in this folder).
"""
