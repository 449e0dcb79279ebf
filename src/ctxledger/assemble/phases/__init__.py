"""The phases of one assembly, in order: filter, budget, select, repair, rehydrate, serialize.

Each phase is one module with one entry function that takes the previous phase's typed result
(:mod:`ctxledger.assemble.assembler` runs them; the manifest phase is :mod:`ctxledger.assemble.record`).
"""
