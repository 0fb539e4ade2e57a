"""(family stub: filled in by its owner; see docs/adding_ops.md)"""
EXPORTS: dict = {}
METHODS: dict = {}
