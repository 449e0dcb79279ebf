"""Data bundled for ``ctxledger demo``: one real tau-bench trajectory (MIT; see ``NOTICE`` here).

Only MIT-licensed tau-bench data may live here. LoCoMo is licensed for non-commercial use and must
never be bundled with the package.
"""
