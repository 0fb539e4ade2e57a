"""TensorBoard `Summary` protos for scalars, histograms, images, text and hyper-parameters, built
from NumPy values with the protobufs the `tensorboard` package ships."""
from __future__ import annotations

import time

import numpy as np
from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.types_pb2 import DT_STRING
from tensorboard.plugins.hparams import api_pb2, metadata as hparams_metadata, plugin_data_pb2

from ...tensor import Tensor
from .png import encode_png


def to_numpy(value, what: str) -> np.ndarray:
    """A Tensor (any device), array or number as a NumPy array."""
    if isinstance(value, Tensor):
        value = value.detach()
        return np.asarray(value._data.get() if hasattr(value._data, "get") else value._data)
    try:
        return np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{what}: expected a Tensor, array or number, got "
                        f"{type(value).__name__}") from exc


def scalar(tag: str, value) -> Summary:
    arr = to_numpy(value, "add_scalar")
    if arr.size != 1:
        raise ValueError(f"add_scalar({tag!r}): expected one value, got shape {arr.shape}")
    return Summary(value=[Summary.Value(tag=tag, simple_value=float(arr.reshape(())))])


def _tensorflow_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket limits: ±1e-12 growing by 10% to ±1e20, and 0."""
    pos = [1e-12]
    while pos[-1] < 1e20:
        pos.append(pos[-1] * 1.1)
    return np.array([-p for p in reversed(pos)] + [0.0] + pos + [np.finfo(np.float64).max])


def histogram(tag: str, values, bins="tensorflow") -> Summary:
    """`bins`: "tensorflow" (exponential buckets), an int, or any of `np.histogram`'s rules.
    A bucket holds the values above the previous limit, up to its own limit."""
    arr = to_numpy(values, "add_histogram").astype(np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"add_histogram({tag!r}): no values")
    if not np.isfinite(arr).all():
        raise ValueError(f"add_histogram({tag!r}): the values contain NaN or infinity")
    if isinstance(bins, str) and bins == "tensorflow":
        limits = _tensorflow_limits()
        counts = np.bincount(np.searchsorted(limits, arr, side="left"), minlength=len(limits))
        used = np.nonzero(counts)[0]
        lo, hi = max(used[0] - 1, 0), used[-1] + 1   # one empty bucket marks the left edge
        limits, counts = limits[lo:hi], counts[lo:hi]
    else:
        counts, edges = np.histogram(arr, bins=bins)
        limits = edges[1:]
    proto = HistogramProto(min=float(arr.min()), max=float(arr.max()), num=float(arr.size),
                           sum=float(arr.sum()), sum_squares=float(arr @ arr),
                           bucket_limit=limits.tolist(), bucket=counts.astype(float).tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=proto)])


_LAYOUTS = {"CHW": (1, 2, 0), "HWC": (0, 1, 2), "HW": None}


def image(tag: str, img, dataformats: str = "CHW") -> Summary:
    """One image: floats in [0, 1] (scaled to 0..255) or uint8; 1, 3 or 4 channels."""
    arr = to_numpy(img, "add_image")
    layout = dataformats.upper()
    if layout not in _LAYOUTS or arr.ndim != len(layout):
        raise ValueError(f"add_image({tag!r}): dataformats must be one of {list(_LAYOUTS)} and "
                         f"match the image's dimensions; got {dataformats!r} for shape {arr.shape}")
    hwc = arr[:, :, None] if layout == "HW" else arr.transpose(_LAYOUTS[layout])
    if hwc.shape[2] not in (1, 3, 4):
        raise ValueError(f"add_image({tag!r}): expected 1, 3 or 4 channels, got {hwc.shape[2]} "
                         f"(shape {arr.shape}, dataformats {dataformats!r})")
    if hwc.dtype.kind == "f":
        hwc = np.round(np.clip(hwc, 0, 1) * 255)
    elif hwc.dtype != np.uint8 and (hwc.min() < 0 or hwc.max() > 255):
        raise ValueError(f"add_image({tag!r}): integer pixels must lie in 0..255")
    hwc = np.ascontiguousarray(hwc.astype(np.uint8))
    h, w, c = hwc.shape
    return Summary(value=[Summary.Value(tag=tag, image=Summary.Image(
        height=h, width=w, colorspace=c, encoded_image_string=encode_png(hwc)))])


def text(tag: str, text_string: str) -> Summary:
    """The text plugin's summary (tag `<tag>/text_summary`, as PyTorch writes it)."""
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(dtype=DT_STRING, string_val=[str(text_string).encode("utf-8")],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=f"{tag}/text_summary", metadata=meta,
                                        tensor=tensor)])


def _hparam_value(name: str, value) -> struct_pb2.Value:
    if isinstance(value, Tensor):
        value = to_numpy(value, "add_hparams").item()
    if isinstance(value, (bool, np.bool_)):
        return struct_pb2.Value(bool_value=bool(value))
    if isinstance(value, (int, float, np.number)):
        return struct_pb2.Value(number_value=float(value))
    if isinstance(value, str):
        return struct_pb2.Value(string_value=value)
    raise ValueError(f"add_hparams: hyper-parameter {name!r} must be a bool, number, string or "
                     f"one-element Tensor, got {type(value).__name__}")


def _hparams_summary(tag: str, data: plugin_data_pb2.HParamsPluginData) -> Summary:
    data.version = hparams_metadata.PLUGIN_DATA_VERSION
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name=hparams_metadata.PLUGIN_NAME, content=data.SerializeToString()))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta,
                                        tensor=hparams_metadata.NULL_TENSOR)])


_HPARAM_TYPES = {"bool_value": api_pb2.DATA_TYPE_BOOL, "number_value": api_pb2.DATA_TYPE_FLOAT64,
                 "string_value": api_pb2.DATA_TYPE_STRING}


def hparams(hparam_dict: dict, metric_dict: dict, domains: dict | None = None) -> list:
    """The hparams plugin's experiment, session-start and session-end summaries."""
    values = {k: _hparam_value(k, v) for k, v in hparam_dict.items()}
    infos = []
    for name, v in values.items():
        info = api_pb2.HParamInfo(name=name, type=_HPARAM_TYPES[v.WhichOneof("kind")])
        if domains and name in domains:
            info.domain_discrete.values.extend([_hparam_value(name, d) for d in domains[name]])
        infos.append(info)
    metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=k)) for k in metric_dict]
    experiment = plugin_data_pb2.HParamsPluginData(
        experiment=api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics))
    start = plugin_data_pb2.HParamsPluginData(session_start_info=plugin_data_pb2.SessionStartInfo(
        hparams=values, start_time_secs=time.time()))
    end = plugin_data_pb2.HParamsPluginData(session_end_info=plugin_data_pb2.SessionEndInfo(
        status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time()))
    return [_hparams_summary(hparams_metadata.EXPERIMENT_TAG, experiment),
            _hparams_summary(hparams_metadata.SESSION_START_INFO_TAG, start),
            _hparams_summary(hparams_metadata.SESSION_END_INFO_TAG, end)]
