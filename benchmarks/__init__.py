"""Benchmarks of trio_agent against the Trio floor: ``python -m benchmarks`` (see ``run.py``)."""
