"""The ctxledger benchmark: a script, not a test.

Run ``python bench/run.py --help`` (or ``python -m bench.run``). Modules:

* :mod:`bench.stats`: median / p95 of repeated timings;
* :mod:`bench.workloads`: synthetic traces from ``../shared/tools/gen_trace.py`` and real trajectories
  from ``../shared/data`` (tau-bench, mini-swe-agent), chained into one long OpenAI-format conversation;
* :mod:`bench.backends`: throw-away SQLite files and a throw-away PostgreSQL database;
* :mod:`bench.ours`: import throughput and assembly latency (cold, restart, warm, append-one) of ctxledger;
* :mod:`bench.plan`: repeats and time limits that keep a run bounded (skips predicted-too-slow sizes);
* :mod:`bench.measure`: one workload on one backend, and the peers beside it, as result rows;
* :mod:`bench.peers`: the same-run comparisons (newest-messages-that-fit, langchain-core ``trim_messages``);
* :mod:`bench.quality`: token reduction against full replay on tau-bench at an 8k input budget;
* :mod:`bench.first_call`: the first call of a new process, in a child process (CPU time, peak memory);
* :mod:`bench.call_phases`: that call's CPU time by phase (``bench.first_call --phases``);
* :mod:`bench.targets`: the benchmark's targets checked against a run;
* :mod:`bench.report`: the printed tables;
* :mod:`bench.profiling`: ``--profile DIR``, one extra cProfile'd run of each scenario.
"""
