"""Profiling: reference profiles for the Planner, Nsight Compute findings for the Coder."""
