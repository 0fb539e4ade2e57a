"""The exporter's error type."""


class ExportError(RuntimeError):
    """A model (or an argument of `to_onnx`) cannot be exported; the message says what and where."""
