"""Assembly: candidate snapshots, atomic units, selection and the assembler."""
