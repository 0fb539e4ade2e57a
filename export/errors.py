"""The exporter's error type."""


class ExportError(RuntimeError):
    """A model (or an argument of `to_onnx`) cannot be exported; the message says what and where."""


def describe_node(node) -> str:
    """`op 'name' (at file.py:12, in module 'encoder.0')`, for messages."""
    scope = f"in module '{node.scope}'" if node.scope else "in the top-level module"
    where = f"at {node.source}, {scope}" if node.source else scope
    return f"op '{node.op.name}' ({where})"
