"""Placeholder: the norm emitters are being written."""

EMITTERS: dict = {}
