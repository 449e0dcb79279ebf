"""ctxledger: policy-governed context assembly for LLM agents."""

__version__ = "0.1.0"
