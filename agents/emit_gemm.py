"""Placeholder: the gemm emitters are being written."""

EMITTERS: dict = {}
