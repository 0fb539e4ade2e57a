"""Writes docs/pytorch_compat.md: which of PyTorch's public names dualflow has, from both
libraries' code, with the notes on what differs.

    python docs/pytorch_compat.py > docs/pytorch_compat.md

Needs PyTorch installed (as the list to compare against); dualflow never imports it.
"""
from __future__ import annotations

import importlib
import inspect
import warnings

import torch
import torch.distributed.optim

import dualflow as flow


def _public(module, keep) -> list:
    names = getattr(module, "__all__", None) or dir(module)
    with warnings.catch_warnings():    # reading a deprecated alias warns
        warnings.simplefilter("ignore", FutureWarning)
        return sorted({n for n in names if not n.startswith("_") and hasattr(module, n)
                       and keep(getattr(module, n))})


def _is_function(obj) -> bool:
    return callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj)


def _is_module_class(obj) -> bool:
    return inspect.isclass(obj) and issubclass(obj, torch.nn.Module)


def _is_class(obj) -> bool:
    return inspect.isclass(obj)


def _anything(obj) -> bool:
    return True


def _not_a_module(obj) -> bool:
    return not inspect.ismodule(obj)


def _ours(name: str):
    """dualflow's namespace `name`, or None while dualflow has none (every name then counts as
    missing)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


# (title, torch namespace, dualflow namespace, which torch names count)
NAMESPACES = [
    ("`torch` functions", torch, flow, _is_function),
    ("`torch.Tensor` methods and properties", torch.Tensor, flow.Tensor, _anything),
    ("`torch.nn` layers", torch.nn, flow.nn, _is_module_class),
    ("`torch.nn.parallel` layers", torch.nn.parallel, flow.nn.parallel, _is_module_class),
    ("`torch.nn.functional`", torch.nn.functional, flow.nn.functional, _is_function),
    ("`torch.nn.init`", torch.nn.init, flow.nn.init, _is_function),
    ("`torch.optim`", torch.optim, flow.optim, _is_class),
    ("`torch.optim.lr_scheduler`", torch.optim.lr_scheduler, flow.optim.lr_scheduler, _is_class),
    ("`torch.utils.data`", torch.utils.data, flow.utils.data, _anything),
    ("`torch.cuda` functions", torch.cuda, flow.cuda, _is_function),
    ("`torch.autograd`", torch.autograd, flow.autograd, _anything),
    ("`torch.amp`", torch.amp, flow.amp, _anything),
    ("`torch.distributed`", torch.distributed, _ours("dualflow.distributed"), _not_a_module),
    ("`torch.distributed.optim`", torch.distributed.optim, _ours("dualflow.distributed.optim"),
     _is_class),
    ("`torch.distributions`", torch.distributions, _ours("dualflow.distributions"), _is_class),
    ("`torch.linalg`", torch.linalg, flow.linalg, _is_function),
    ("`torch.sparse` functions", torch.sparse, flow.sparse, _is_function),
]

DIFFERENCES = """\
## What differs

Porting API (this page's tests: `tests/test_tensor_api.py`, `tests/test_namespaces.py`,
`tests/test_torch_checkpoints.py`):

* **`Tensor.shape` is a plain tuple; `Tensor.size()` returns `dualflow.Size`** (a tuple with
  `numel()`). Making `.shape` a `Size` costs ~70 ns per read, and the autograd recorder reads the
  shape of every input of every op: a recorded binary op went from 2.16 to 2.38 µs. So
  `x.shape.numel()` fails where `x.size().numel()` works; comparisons and indexing are the same.
* **Type names** are `dualflow.FloatTensor` (`dualflow.cuda.FloatTensor` on a GPU);
  `x.type("torch.LongTensor")` is accepted as well. The legacy constructors
  (`flow.FloatTensor(...)` ... `flow.BoolTensor`, plus `ShortTensor`/`CharTensor`) make CPU
  tensors; there is no `flow.cuda.FloatTensor`. `flow.LongTensor(t)` returns `t` when it is
  already int64 and refuses another dtype, as PyTorch does.
* **`flow.backends.*` flags** (`cudnn.benchmark`, `cudnn.deterministic`, `cudnn.enabled`,
  `cuda.matmul.allow_tf32`) keep what is assigned and change nothing: dualflow calls neither
  cuDNN nor TF32 matmuls itself. `backends.mps.is_available()` and `backends.cudnn.is_available()`
  are False.
* **`flow.cuda`** has `is_available`, `device_count`, `current_device`, `set_device`,
  `synchronize`, `manual_seed(_all)` and `empty_cache`, over CuPy imported on first use. Without a
  GPU the seeding functions do nothing and the others raise, as in PyTorch.
  `flow.accelerator.current_accelerator()` is `device('cuda')` when CuPy is installed.
* **`nn.DataParallel`** runs the wrapped module on the device its parameters are on; the batch is
  not split (a warning says so when several `device_ids` are given). `.module` and the
  `module.` state-dict prefix are PyTorch's.
* **`flow.utils.checkpoint.checkpoint(fn, *args)`** recomputes `fn` in backward through a custom
  `autograd.Function`. Values and gradients equal the plain call (random draws are replayed).
  `use_reentrant` is accepted and makes no difference. Tensors needing gradients must reach the
  checkpoint as arguments, as parameters of a Module `fn` is or is bound to, or as leaf tensors
  in `fn`'s closure; a global tensor is reported when backward recomputes, a non-leaf closure
  tensor at once. `fn` must return a tensor or a tuple of tensors; double backward is refused; in
  a trace (GRAPH mode) `fn` is simply called. As in PyTorch, BatchNorm statistics update twice.
  `checkpoint_sequential` checkpoints every segment but the last, as PyTorch.
* **`flow.compile(model)`** accepts nn.Modules only (not functions) and runs them as GRAPH mode
  does: traced once per input signature, Python control flow unrolled, a read of a tensor value
  while tracing raises an error naming the line. PyTorch's tuning arguments (`mode`, `backend`,
  `fullgraph`, `dynamic`, `options`) are accepted and ignored. State-dict keys carry the
  `_orig_mod.` prefix, as PyTorch's `OptimizedModule`.
* **What a compiled call does with Python** (GRAPH mode, `flow.compile`, `nn.Graph`): where
  torch.compile breaks the graph inside a forward, dualflow runs the whole module call eagerly
  (its submodules still compile), with one warning; `nn.Graph` raises instead. Appends and
  stores into lists, dicts and sets and a counter stepped by a constant are replayed after each
  compiled call, as torch.compile does (in GRAPH mode a stored tensor keeps its gradient);
  other container changes and a plain attribute set on every call run eagerly. Side effects
  Python cannot see through (print, logging, files) happen only while tracing. Double backward
  through a compiled call recomputes that module eagerly.
* **`flow.onnx.export`** takes `input_names`, `output_names`, `dynamic_axes`, `opset_version`
  (default 17), `do_constant_folding` and `export_params` (True only), and returns the
  `onnx.ModelProto` (PyTorch 2 returns an `ONNXProgram` or None). The dynamo-era arguments are
  not accepted. `opset_version` may be 10 to the newest; an op the opset lacks is refused naming
  it, its line and the opset it needs (PyTorch's exporter does the same, op by op). float64
  LSTM/GRU/RNN layers export as a Scan over the cell math (ONNX Runtime runs no double LSTM
  node), not as the LSTM node PyTorch emits. An interpolate `scale_factor` on a dynamic size must
  be exact in float32 (2, 1.5, 0.25, ...), else that axis cannot be dynamic.
* **`flow.load` of PyTorch checkpoints** reads the zip format of `torch.save` (PyTorch >= 1.6):
  state dicts, optimizer state dicts and containers of tensors. A restricted unpickler resolves
  only tensor/parameter rebuilds, storage types, dtypes, `torch.Size`, `torch.device`,
  `OrderedDict`, `Counter`, sets and bytes, and refuses every other global by name, so pickled
  code never runs (`weights_only` changes nothing). Tensors sharing a storage share memory, and
  strides are kept (expanded tensors are copied). Parameters come back as tensors with
  `requires_grad=True` (`nn.Parameter` is not in `framework/`); bfloat16 stays bfloat16;
  complex storages are refused. The pre-1.6 format, TorchScript archives, whole pickled Modules
  and a callable `map_location` are not supported.
* **`flow.save`** writes dualflow's own format (safetensors with a JSON structure and a SHA-256
  digest), not PyTorch's: `torch.load` cannot read it (the `safetensors` package reads its
  tensors). Saving a whole Module (or optimizer) is refused with a message to save its
  `state_dict()`.

Errors, random numbers and numerics (`tests/ops/test_shape_error_types.py`,
`tests/framework/test_num_threads.py`):

* **Exception types.** Mismatched shapes (matmul, broadcasting, reshape, cat, a layer's input
  size) raise `ShapeError`, which is both a `ValueError` and a `RuntimeError`, so PyTorch code's
  `except RuntimeError` catches them; an op whose kernel fails raises `OpError`, also both.
  Out-of-range indices are `IndexError`, as in PyTorch. Some argument errors PyTorch reports as
  `RuntimeError` are plain `ValueError`/`TypeError` here: `Tensor.item()` on more than one
  element, cross-entropy with a float target of the wrong shape (`ValueError`), an in-place op
  whose result cannot be cast to the target's dtype (`TypeError`). Messages differ in wording
  but name the op and the shapes or dtypes. Where PyTorch accepts an argument and fails later,
  dualflow refuses it at once: `StepLR(step_size=0)` and `CosineAnnealingLR(T_max=0)` raise
  `ValueError` (PyTorch divides by zero at a step), `Adam(betas=(0.9,))` a `ValueError` naming
  betas (PyTorch: `IndexError`); `conv2d` on integer tensors raises `TypeError` (PyTorch
  convolves integers on the CPU) (`tests/test_bad_arguments.py`).
* **DataLoader with `persistent_workers=True`**: every pass draws the workers' base seed from
  the generator, as a pass without persistent workers does, so the shuffled order is the same
  for every `num_workers` in every epoch. PyTorch draws it once for persistent workers, so its
  second and later epochs differ from `num_workers=0`'s order.
* **Collectives check that the ranks agree** (kind, element count, dtype, root or reduce op)
  before any data moves and raise `dualflow.distributed.DistBackendError` (a `RuntimeError`) on
  every rank naming each rank's call; PyTorch's gloo reports some of these mismatches
  ("Is there a distributed collective mismatch?") and NCCL hangs or returns garbage. A rank that
  leaves the group makes the others' pending and later collectives raise.
* **Random streams differ from PyTorch's under the same seed.** `flow.manual_seed(s)` seeds
  NumPy's PCG64 on the CPU (CuPy's XORWOW on a GPU); PyTorch uses its Mersenne Twister on the
  CPU and Philox on CUDA. So `randn`, dropout masks, `randperm`, DataLoader shuffling and a
  model's initial weights are different numbers from PyTorch's for the same seed (the same
  distributions). Without `manual_seed` dualflow starts from a fixed seed (67280421310721, so an
  unseeded program draws the same numbers every run) where PyTorch seeds each process afresh.
  Within dualflow a seed gives the same numbers in eager mode, `nn.Graph` and GRAPH mode. To start from PyTorch's weights,
  load its `state_dict` (`flow.load` reads `torch.save` files).
* **Floating point agrees to rounding, not to the bit.** The CPU kernels are NumPy's and its
  BLAS (OpenBLAS), PyTorch's are its own with MKL/oneDNN, and a float32 matmul or reduction sums
  in a different order: results differ by a few ulp times the reduction length, more after many
  training steps. Which OpenBLAS kernel runs (AVX2 or AVX-512, `OPENBLAS_CORETYPE`) changes the
  last bits too.
* **Stride-1 3x3 convolutions** with enough tiles (about 2048 output positions over the batch,
  images of 8x8 and more, 32-256 channels) run as Winograd F(2x2, 3x3) on one or two CPU
  threads, their input gradients too, their weight gradients on 32x32 and larger outputs on one
  thread (`framework/ops/winograd.py`): float32 results carry up to ~2x a direct sum's rounding
  error (so they change with the thread count), and a non-finite input gives NaN where a direct
  sum gives an infinity.
* **Threads.** `flow.set_num_threads(n)` / `flow.get_num_threads()` set and read the BLAS's
  threads (and any OpenMP runtime's) for the whole process; there is no inter-op thread pool, so
  `set_num_interop_threads` is missing. Eager elementwise kernels run on one thread; compiled
  fused elementwise groups of at least 131,072 elements run their row blocks on that many
  threads (same bits).
* **Install.** `pip install -e .` installs numpy, ml_dtypes and threadpoolctl only; ONNX export
  needs the `onnx` package (`pip install -e ".[onnx]"`, which also brings onnxruntime for
  `flow.compile(model, backend="onnxruntime")`), as `torch.onnx` does.

Packed sequences and parametrizations (`tests/nn/test_packed_sequence.py`,
`tests/nn/test_parametrize.py`, `tests/nn/test_parametrizations.py`):

* **`PackedSequence`** keeps the padded batch (in the caller's order) and the lengths; `data`,
  `batch_sizes` and the index fields are PyTorch's, computed when read, and it unpacks like
  PyTorch's 4-tuple but is not a namedtuple (no `_replace`). The recurrent layers run on the
  padded form and stop each sequence after its own length, so in GRAPH mode and nn.Graph the
  lengths are data: other lengths replay the same graph, and ONNX export gives the LSTM/GRU/RNN
  node a `sequence_lens` input. There, two things need values and are refused while tracing:
  reading `packed.data` (its row count is the sum of the lengths) and building a
  `PackedSequence` from `data`/`batch_sizes`; and a batch must be padded to its longest
  sequence (eager mode trims extra padding; a compiled recurrent layer raises rather than return
  a longer output). `enforce_sorted=True` is checked only for lengths known in Python.
* **Legacy `nn.utils.weight_norm` / `spectral_norm`**: after each call `module.weight` holds
  the recomputed weight detached (PyTorch keeps its autograd history), which is what lets a
  compiled call write it back. Their state-dict compatibility hooks (loading old `weight_g` /
  `weight_v` keys into the parametrization) are not there.
* **`parametrizations.orthogonal`** has PyTorch's three maps; `householder` without the
  trivialization reads the weight's Householder QR through NumPy once, at registration or
  assignment (CPU). `flow.matrix_exp` and `flow.orgqr` (PyTorch's `linalg.householder_product`, also
  under `flow.linalg`) are ops.
* **In-place shape ops** (`squeeze_`, `unsqueeze_`, `t_`, `transpose_`) make the tensor object
  the view; `stride()`/`storage_offset()` report NumPy's layout, which is PyTorch's wherever the
  same op is a view in both (a reshape that must copy starts a new storage in both).

Linear algebra, sparse tensors and vision layers (`tests/ops/test_linalg_solve.py`,
`tests/ops/test_linalg_decompositions.py`, `tests/test_sparse.py`, `tests/nn/test_vision_layers.py`,
`tests/nn/test_interpolate_modes.py`, `tests/zoo/test_stn_and_gcn.py`):

* **`flow.linalg`** takes float32 and float64 (no complex dtypes). `solve_triangular` runs the
  general LU solver on the triangle (same solution, O(n^3)). `det`'s gradient is the cofactor
  matrix (from the SVD, singular matrices included, as PyTorch's); its second derivative needs
  an invertible matrix. `lstsq` solves through `pinv` for every driver: the minimum-norm
  solution for every shape and rank (what gelsy/gelsd give); `rank`, `residuals` and
  `singular_values` are filled per driver as PyTorch's CPU does. `pinv` and `matrix_rank` take
  float `atol`/`rtol` only (they are compiled-in attributes), not tensors. `cholesky_ex`
  returns the factor of the positive-definite leading block (zeros after it) for a failing
  matrix, where LAPACK leaves partial values. The LU family (`lu_factor(_ex)`, `lu`,
  `lu_solve`, `solve_ex`, `inv_ex`) runs getrf's column steps on the whole batch without fused
  multiply-adds, so a matrix singular only up to rounding may get another `info` than
  LAPACK's. `eig`, `eigvals` (no complex dtypes) and the `ldl*` family are missing.
* **Sparse COO tensors** (`flow.sparse_coo_tensor`) are a `flow.sparse.SparseTensor`, not a
  `Tensor`: indices, values, `to_dense`, `coalesce`, `sparse.mm`/`spmm`/`mm`/`matmul`/`@` with
  a dense matrix (sparse @ sparse densifies the right operand), `t()`, scaling by a number,
  `sparse.softmax`/`log_softmax`, sparse + sparse, sparse * dense (or sparse, keeping the
  positions both hold) and `requires_grad` are there; dense + sparse and the other layouts
  (CSR, ...) are not. The gradient of a sparse operand is sparse
  on its own pattern for every product (PyTorch's is sparse for `sparse.mm` only, dense for the
  others). `coalesce()` and `to_sparse()` read values, so they run eagerly; compiled calls take
  a sparse argument as its indices and values. SciPy is no dependency: the product is a gather
  and a segment sum.
* **`F.grid_sample`** (bilinear, nearest, bicubic; 3-d without bicubic, as PyTorch) exports as
  ONNX `GridSample` (opset 16; 3-d from opset 20). Its backward differentiates again (PyTorch's
  has no double backward). At a grid point exactly on a pixel centre the bilinear gradient
  w.r.t. the grid is one-sided, and which side depends on the grid's last bit (`affine_grid`'s
  base grid is NumPy's linspace, which rounds differently from PyTorch's in some places).
* **`F.interpolate(antialias=True)`** exports as opset 18's `Resize(antialias=1,
  exclude_outside=1)`, except with `align_corners=True`, which ONNX places differently and the
  exporter refuses.

Mixed precision (`tests/test_amp.py`, `tests/test_bfloat16.py`, `tests/ops/test_low_precision.py`):

* **bfloat16** is `ml_dtypes`' NumPy dtype on the CPU (elementwise ops run through its ufunc
  loops, matmul and convolution accumulate in float32). Promotion is PyTorch's (bfloat16 with
  float16 is float32). CuPy has no bfloat16 arrays, so bfloat16 tensors are CPU-only.
* **float16/bfloat16 reductions and normalisations** (sum, mean, var, std, norm, logsumexp,
  softmax, log_softmax, layer_norm, group_norm, gelu, scaled_dot_product_attention) compute in
  float32 and round the result to the input's dtype, as PyTorch does; results can differ from
  PyTorch's in the last bit, where PyTorch rounds intermediates differently.
* **`flow.autocast(device_type, dtype)`** casts the float inputs of matmul, conv2d,
  conv_transpose2d and einsum to the low dtype (their results stay in it, as in PyTorch) and
  gives softmax, log_softmax, logsumexp, vector norms and the cross-entropy losses float32
  inputs (PyTorch's CUDA "float32" list; its CPU list differs). `nn.Linear` and `nn.Conv2d` are
  composites here, so their float32 bias promotes the layer's output back to float32 where
  PyTorch returns the low dtype. Cast weights are not cached across calls. It is one op table
  with nn.Graph's `config.enable_amp` (`dualflow/amp/policy.py`), whose pass also casts results
  back to float32.
* **`flow.amp.GradScaler`** follows `torch.amp.GradScaler` (scale, unscale_, step, update,
  get/set of the factors, state_dict); the scale is a Python float (PyTorch keeps a tensor), and
  `device` is accepted and unused.

Distributions (`tests/distributions/`, `tests/ops/test_special.py`):

* **`flow.distributions`** has all of PyTorch's families and transforms but the
  ExponentialFamily base (and its Bregman-divergence KL fallback); constraints, `biject_to`/`transform_to` and
  `kl_divergence`/`register_kl` with PyTorch's closed forms (within and across families). Draws come from
  dualflow's generator, so they differ from PyTorch's for one seed, but eager mode, GRAPH mode and
  nn.Graph draw the same numbers from the same seed.
* **Gamma, Chi2, StudentT, Beta and Dirichlet `rsample`** differentiate the Gamma draws by
  implicit reparameterisation computed exactly (incomplete-gamma series or continued fraction,
  `flow._standard_gamma_grad`); PyTorch's is a fitted approximation (up to ~1e-2 relative off).
  Beta and Dirichlet differentiate through each Gamma draw (an unbiased pathwise derivative, not
  PyTorch's per-draw Dirichlet formula). `flow.igamma` (Gamma.cdf) is differentiable in its
  first argument too, where PyTorch raises.
* **`validate_args`** raises PyTorch's errors; value checks are skipped on traced tensors (compiled
  code, ONNX export), as PyTorch skips them under tracing. Beta's messages and repr name its
  own concentrations (PyTorch's name an inner Dirichlet). Multinomial's entropy takes
  lgamma(n + 1) in the parameters' dtype (PyTorch in float32, ~1e-7 off in float64). KL between
  a ContinuousBernoulli and a Uniform covering [0, 1] exactly is finite here (PyTorch: inf).
  LKJCholesky draws row i's length from Beta(i/2, ...) as the onion method does; PyTorch's
  Beta((i-1)/2 + 1/2, ...) skews every correlation past the first row (variance 0.24 for 0.20
  at concentration 1, dimension 4), so draws differ in distribution there; log_prob agrees.
  Wishart.rsample has no `max_try_correction` redraw of singular samples (they can occur only
  for ndim - 1 < df < ndim, which warns at construction as in PyTorch).
* **Special functions** `lgamma`, `digamma`, `polygamma`, `erfinv`, `igamma(c)`, `poisson`,
  `binomial` are computed without SciPy in float64 and rounded once; PyTorch's trigamma is
  accurate to ~1e-9 in float64 (ours ~1e-14), VonMises' log I0 ~1e-7 (ours: i0e's series),
  and `polygamma(n >= 2, inf)` is 0 here (NaN in PyTorch). They have no ONNX operator: an export that needs one (Gamma or Beta log_prob,
  Normal.icdf, stick-breaking's cumprod) is refused with the op named.
"""


def main() -> None:
    print("# PyTorch compatibility\n")
    print(f"Generated by `python docs/pytorch_compat.py` (do not edit by hand) against PyTorch "
          f"{torch.__version__.split('+')[0]}. A name counts as present when dualflow has an "
          "attribute of that name in the matching namespace; behaviour is covered by the tests, "
          "not by this table.\n")
    print("| namespace | PyTorch names | in dualflow |\n|---|---|---|")
    rows = []
    for title, theirs, ours, keep in NAMESPACES:
        names = _public(theirs, keep)
        have = [n for n in names if ours is not None and hasattr(ours, n)]
        rows.append((title, names, have))
        print(f"| {title} | {len(names)} | {len(have)} ({100 * len(have) // max(len(names), 1)}%) |")
    print()
    print(DIFFERENCES)
    print("## Missing names\n")
    print("Everything PyTorch has in these namespaces that dualflow lacks (many `torch` "
          "functions are kernels PyTorch exposes for its own use). Also missing as whole "
          "features: complex dtypes, sparse layouts other than COO (`flow.sparse` has COO "
          "tensors and `sparse.mm`), quantized tensors, `torch.jit`, `torch.fx`, MPS/XPU "
          "devices.\n")
    for title, names, have in rows:
        missing = sorted(set(names) - set(have))
        print(f"**{title}** ({len(missing)}): " + (", ".join(f"`{n}`" for n in missing)
                                                    or "none") + "\n")


if __name__ == "__main__":
    main()
