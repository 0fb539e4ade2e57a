"""Placeholder until this package lands."""
