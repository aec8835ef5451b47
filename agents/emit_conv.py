"""Placeholder: the conv emitters are being written."""

EMITTERS: dict = {}
