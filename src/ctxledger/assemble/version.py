"""The assembler's version, recorded in every manifest; a replay answers only under the same version."""

ASSEMBLER_VERSION = "2.2"
"""Bumped whenever the same snapshot, policy and request could yield a different payload or manifest."""
