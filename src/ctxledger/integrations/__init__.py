"""Integrations that put ctxledger inside an agent framework's loop (each an optional extra).

* :mod:`ctxledger.integrations.openai_agents` — the OpenAI Agents SDK (extra ``openai-agents``);
* :mod:`ctxledger.integrations.langchain` — LangChain v1 agents (extra ``langchain``);
* :mod:`ctxledger.integrations.pydantic_ai` — PydanticAI (extra ``pydantic-ai``);
* :mod:`ctxledger.integrations.otel` — OpenTelemetry spans per assembly (extra ``otel``).

The core never imports this package; each module imports its framework at import time, so a missing extra
fails with the framework's own ``ImportError`` naming the package to install.
"""
