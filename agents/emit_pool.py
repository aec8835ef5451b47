"""Placeholder: the pool emitters are being written."""

EMITTERS: dict = {}
