"""Placeholder: the reduce emitters are being written."""

EMITTERS: dict = {}
