"""Saving and loading compiled graphs: `nn.Graph.save` / `load`, and the pieces GRAPH-mode
modules' `flow.graph.save` / `load` (`graph_mode_save.py`) share with them.

A file (`graph/capture/saved.py`) holds every compiled entry of the call's cache — its optimised IR
(`graph/ir/serialize.py`), its output tree, and its cache key in portable form (each tensor
argument's shape, strides, dtype and requires_grad, the argument structure, train/eval flags,
grad mode, autocast) — plus the model's and optimizers' state dicts and a description of the
module tree (module names and classes, parameter and buffer names, shapes and dtypes, the plain
attributes Python code may branch on) and of the graph's config.

Loading checks all of it against the objects the user built again — a different module tree,
state dict, optimizer layout, config or graph class raises before anything is changed — then
loads the state dicts, binds each graph's parameters by name, plans memory, generates code (no
tracing, no passes) and installs each entry under the key the next call computes, so that call
replays.
"""
from __future__ import annotations

import copy

import numpy as np

from dualflow.graph.capture import saved
from dualflow.graph.capture.optim_step import hyper_parameters
from dualflow.graph.ir.serialize import Decoder, Encoder, SerializeError, bind, encode_type
from dualflow.graph.ir.serialize_types import rename_symbols
from dualflow.graph.ir.symbolic import SymInt
from dualflow.graph.capture.call_trace import scope_names
from dualflow.ops.opdef import TensorType
from dualflow.tensor import Tensor

from .graph_mode import module_tree
from .graph_entry_check import check_train
from .graph_update_check import Reference, check_optimizers, check_updates, merged, optimizer_facts

_KEY_TAIL = 7   # a key ends with the front end's five items, grad mode and the autocast state


# ---- what both front ends share --------------------------------------------------------------
def _portable_key(enc: Encoder, key: tuple) -> dict:
    """The parts of a cache key that mean the same in another process (not the ids and
    counters a key also holds, which `load` takes from the live objects)."""
    n = len(key) - _KEY_TAIL
    return {"leaves": enc.value(key[:n], "cache key"), "structure": enc.value(key[n], "argument "
            "structure"), "flags": enc.value(key[n + 1], "train/eval flags"),
            "grad": key[-2], "autocast": enc.value(key[-1], "autocast state")}


def _by_entry(cache) -> list:
    """(entry, its keys) for each distinct compiled entry of a cache: an entry compiled with
    symbolic sizes sits under one key per size it served."""
    groups: dict = {}
    for key, entry in cache.items():
        groups.setdefault(id(entry), (entry, []))[1].append(key)
    return list(groups.values())


def _symbols_made_equal(cache) -> dict:
    """id(entry) -> the symbols its trace's guards made equal (`ShapeEnv.same`), for entries
    compiled with size symbols."""
    return {id(se.entry): dict(se.env.same) for ses in cache.dynamic.entries.values()
            for se in ses if se.env is not None}


def _saved_key(dec: Decoder, saved_key: dict) -> dict:
    return {name: dec.value(saved_key[name])
            for name in ("leaves", "structure", "flags", "grad", "autocast")}


def _check_keys(graph, keys: list, where: str) -> None:
    """Each saved key's tensor arguments have the types the graph's inputs declare (a crafted
    key would replay the graph on arguments of other shapes or dtypes); the sizes of symbolic
    dims must agree with one value per symbol."""
    for key in keys:
        leaves = key["leaves"]
        if len(leaves) > len(graph.inputs):
            raise SerializeError(f"{where}: a saved call passes {len(leaves)} tensors to graph "
                                 f"'{graph.name}', which takes {len(graph.inputs)}")
        sizes: dict = {}
        for i, (leaf, v) in enumerate(zip(leaves, graph.inputs)):
            try:
                shape, dtype, dims = tuple(leaf[0]), np.dtype(leaf[2]), tuple(v.type.shape)
            except (TypeError, IndexError, ValueError):
                raise SerializeError(f"{where}: malformed saved call {leaf!r:.80}") from None
            if len(shape) != len(dims) or dtype != v.type.dtype.np or \
                    not all(_dim_fits(n, d, sizes) for n, d in zip(shape, dims)):
                raise SerializeError(f"{where}: a saved call passes a {dtype}{list(shape)} "
                                     f"tensor as input {i} of graph '{graph.name}', which "
                                     f"declares {v.type}")


def _dim_fits(n, d, sizes: dict) -> bool:
    """Whether size `n` fits dim `d`: equal to an int dim, or to a symbolic one of the form
    c*s + k with s taking one value across the call (`sizes`)."""
    if type(d) is not SymInt:
        return type(n) is int and n == d
    terms = dict(d.expr.terms)
    var = [(m, c) for m, c in terms.items() if m]
    if type(n) is not int or len(var) != 1 or len(var[0][0]) != 1:
        return False
    (name,), c = var[0]
    k = terms.get((), 0)
    if c <= 0 or (n - k) % c or (n - k) // c < 0:
        return False
    return sizes.setdefault(name, (n - k) // c) == (n - k) // c


def _live_key(k: dict, middle: tuple) -> tuple:
    """A cache key from its saved portable parts (`_saved_key`) and the front end's live items
    `middle`."""
    return k["leaves"] + (k["structure"], k["flags"]) + middle + (k["grad"], k["autocast"])


def _tree_facts(enc: Encoder, roots: dict) -> list:
    """What a compiled graph assumed of the module tree, in comparable form."""
    facts = []
    for prefix, root in roots.items():
        walk = module_tree(root)
        hooks = [type(m).__name__ for m in walk.modules if m._forward_hooks or
                 m._forward_pre_hooks]
        if hooks:
            raise SerializeError(f"{hooks[0]} has forward hooks, which a compiled graph runs "
                                 "as traced code but a file cannot hold; remove them to save")
        dot = f"{prefix}." if prefix else ""
        facts.append({
            "modules": [[dot + n, type(m).__name__] for n, m in root.named_modules()],
            "tensors": [[dot + n, encode_type(_type(t)), bool(t.requires_grad)]
                        for n, t in list(root.named_parameters(remove_duplicate=False)) +
                        list(root.named_buffers(remove_duplicate=False))],
            "attributes": [[i, name] for i, (m, name) in enumerate(walk.attrs)],
            "values": enc.value(walk.guards, "module attributes")})
    return facts


def _type(t: Tensor) -> TensorType:
    return TensorType(t.shape, t.dtype, t.device)


def _check_same(saved_facts, live_facts, where: str) -> None:
    for name in ("modules", "tensors", "attributes", "values"):
        for old, new in zip(saved_facts, live_facts):
            if old[name] != new[name]:
                diff = next((f"{a} saved, {b} now" for a, b in zip(old[name], new[name])
                             if a != b), f"{len(old[name])} saved, {len(new[name])} now")
                hint = ("; the graph reads tensors the modules keep as attributes (a cached "
                        "mask): call the model once before loading, so it makes them") \
                    if name == "attributes" else ""
                raise SerializeError(f"{where}: the model differs from the one saved "
                                     f"({name}: {diff}){hint}")
    if len(saved_facts) != len(live_facts):
        raise SerializeError(f"{where}: {len(saved_facts)} module trees saved, "
                             f"{len(live_facts)} now")


def _check_state_dict(saved_sd, live_sd: dict, where: str) -> None:
    if not isinstance(saved_sd, dict) or set(saved_sd) != set(live_sd):
        raise SerializeError(f"{where}: the saved state dict's keys differ from the model's")
    for k, t in live_sd.items():
        s = saved_sd[k]
        if not isinstance(s, Tensor) or tuple(s.shape) != tuple(t.shape) or s.dtype != t.dtype:
            raise SerializeError(f"{where}: '{k}' is saved as {getattr(s, 'dtype', s)}"
                                 f"{list(getattr(s, 'shape', ()))}, the model's is "
                                 f"{t.dtype}{list(t.shape)}")


def _dry_run_optimizers(optimizers: list, saved_sds, where: str) -> list:
    """Each optimizer as it will be after loading its saved state, built on shallow copies (the
    originals are not touched), so the graphs' names can be checked first."""
    if not isinstance(saved_sds, list) or len(saved_sds) != len(optimizers):
        raise SerializeError(f"{where}: {len(saved_sds) if isinstance(saved_sds, list) else 0}"
                             f" optimizer states saved, {len(optimizers)} optimizers given")
    out = []
    for opt, sd in zip(optimizers, saved_sds):
        trial = copy.copy(opt)
        try:
            trial.load_state_dict(sd)
        except (ValueError, KeyError, TypeError) as exc:
            raise SerializeError(f"{where}: the saved {type(opt).__name__} state does not fit: "
                                 f"{exc}") from None
        for p, state in trial.state.items():
            for k, t in state.items():
                if isinstance(t, Tensor) and t.ndim and tuple(t.shape) != tuple(p.shape):
                    raise SerializeError(f"{where}: optimizer state '{k}' is saved with shape "
                                         f"{tuple(t.shape)} for a parameter of shape "
                                         f"{tuple(p.shape)}")
        out.append(trial)
    return out


def _optimizer_tensors(optimizers: list, param_names: dict) -> dict:
    """state name -> tensor, named as nn.Graph's traces name them
    (`optimizer0.model.0.weight.exp_avg`)."""
    out = {}
    for oi, opt in enumerate(optimizers):
        for p, state in opt.state.items():
            for k, t in state.items():
                if isinstance(t, Tensor):
                    out[f"optimizer{oi}.{param_names.get(id(p), 'param')}.{k}"] = t
    return out


def _decode_all(dec: Decoder, records: list, fields: tuple) -> list:
    return [{f: dec.graph(r[f]) for f in fields} for r in records]


def _bind_all(graphs: list, tensors: dict) -> None:
    for gs in graphs:
        for g in gs.values():
            bind(g, tensors)


def _check_graph_updates(graphs: list, trials: list, names: dict, where: str) -> None:
    """Each graph's state updates against its optimizers' (named as nn.Graph traces them)."""
    def name(p):
        return names.get(id(p), "param")
    ref = merged([Reference(opt, name, lambda p, k, oi=oi: f"optimizer{oi}.{name(p)}.{k}",
                            lambda gi, oi=oi: f"optimizer{oi}.group{gi}.lr")
                  for oi, opt in enumerate(trials)])
    for gs in graphs:
        for graph in gs.values():
            check_updates(graph, ref, where)


# ---- nn.Graph --------------------------------------------------------------------------------
def _graph_tensors(g) -> dict:
    return {n: t for prefix, m in g._modules.items() for n, t in _named_tensors(m, prefix).items()}


def _named_tensors(module, prefix: str = "") -> dict:
    dot = f"{prefix}." if prefix else ""
    return {dot + n: t for n, t in list(module.named_parameters(remove_duplicate=False)) +
            list(module.named_buffers(remove_duplicate=False))}


def _by_array(tensors: dict):
    """`Encoder.name_of`: the name of the named tensor whose array an unnamed one shares (a
    traced `p.data.add_(...)` binds `p.data`, a second tensor over `p`'s array)."""
    names = {id(t._data): n for n, t in reversed(tensors.items())}
    return lambda t: names.get(id(getattr(t, "_data", None)))


def _config_facts(config) -> list:
    scaler = config.grad_scaler
    if scaler is not None:
        raise SerializeError("a graph with a gradient scaler (enable_amp with float16) keeps its "
                             "scale in tensors outside the model; it cannot be saved yet")
    return [config.gradient_accumulation_steps, sorted(config.disabled_passes), config.verify,
            None if config.amp_dtype is None else config.amp_dtype.name,
            [type(m).__name__ for m in config._checkpointed]]


def save_graph(g, path) -> None:
    """`nn.Graph.save`: every compiled entry, the state dicts, and what they assumed."""
    items = g._cache.items()
    name = type(g).__name__
    if not items:
        raise RuntimeError(f"{name}.save: nothing is compiled yet; call the graph first")
    tensors = _graph_tensors(g)
    enc = Encoder(_by_array(tensors))
    names = {id(t): n for n, t in tensors.items()}
    entries = []
    same = _symbols_made_equal(g._cache)
    for entry, keys in _by_entry(g._cache):
        if entry.effects:
            raise SerializeError(f"{name}.save: the compiled build assigns module attributes "
                                 "or changes its arguments in place, which a file cannot "
                                 "replay yet")
        entries.append({"keys": [_portable_key(enc, k) for k in keys],
                        "graph": rename_symbols(enc.graph(entry.exe.graph),
                                                same.get(id(entry))),
                        "tree": enc.value(entry.tree,
                                                                               "build() output"),
                        "n_user": entry.n_user, "n_out": entry.n_out,
                        "grad_params": [names[id(p)] for p in entry.grad_params],
                        "report": entry.report})
    optimizers = [opt for opt, _ in g._optimizers]
    structure = {"class": name, "config": _config_facts(g.config), "warmed": g._warmed,
                 "tree": _tree_facts(enc, dict(g._modules)), "entries": entries,
                 "optimizers": optimizer_facts(optimizers)}
    state = {"model": g.state_dict(), "optimizers": [opt.state_dict() for opt in optimizers]}
    saved.write(path, "nn.Graph", structure, enc.arrays, state)


def load_graph(g, path) -> None:
    """`nn.Graph.load`: check everything, then load state and install the compiled entries."""
    from .graph import _TrainEntry
    name = type(g).__name__
    where = f"{name}.load({str(path)!r})"
    structure, arrays, state = saved.read(path, "nn.Graph")
    dec = Decoder(arrays)
    try:
        if structure["class"] != name:
            raise SerializeError(f"{where}: the file was saved from a {structure['class']}, "
                                 f"not a {name} (a different build)")
        if structure["config"] != _config_facts(g.config):
            raise SerializeError(f"{where}: graph.config differs from the saved one "
                                 f"({structure['config']} saved, {_config_facts(g.config)} now)")
        _check_same(structure["tree"], _tree_facts(Encoder(), dict(g._modules)), where)
        _check_state_dict(state.get("model"), g.state_dict(), where)
        optimizers = [opt for opt, _ in g._optimizers]
        check_optimizers(structure["optimizers"], optimizers, state.get("optimizers"), where)
        trials = _dry_run_optimizers(optimizers, state.get("optimizers"), where)
        records = [{"keys": [_saved_key(dec, k) for k in r["keys"]],
                    "tree": dec.value(r["tree"]), "n_user": int(r["n_user"]),
                    "n_out": int(r["n_out"]), "grad_params": [str(p) for p in r["grad_params"]],
                    "report": dict(r["report"])} for r in structure["entries"]]
        graphs = _decode_all(dec, structure["entries"], ("graph",))
        warmed = bool(structure["warmed"])
    except SerializeError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise SerializeError(f"{where}: malformed file structure ({exc})") from None
    names = scope_names(g._modules)[0]   # as nn.Graph's traces name optimizer state
    _check_graph_updates(graphs, trials, names, where)
    for rec, gs in zip(records, graphs):
        _check_keys(gs["graph"], rec["keys"], where)
    lr_type = Tensor._wrap(np.zeros((), np.float64))
    planned = {**_graph_tensors(g), **_optimizer_tensors(trials, names),
               **{f"optimizer{oi}.group{gi}.lr": lr_type for oi, opt in enumerate(trials)
                  for gi in range(len(opt.param_groups))}}
    _bind_all(graphs, planned)   # every name and type checked before anything changes
    for rec, gs in zip(records, graphs):
        for p in rec["grad_params"]:
            if p not in planned:
                raise SerializeError(f"{where}: the saved graph returns the gradient of '{p}', "
                                     "which the model does not have")
        check_train(gs["graph"], rec["tree"], rec["n_user"], rec["n_out"],
                    [planned[p] for p in rec["grad_params"]], where)

    g.load_state_dict(state["model"])
    for opt, sd in zip(optimizers, state["optimizers"]):
        opt.load_state_dict(sd)
    bindings = g._bind_lrs({})
    lr_names = [f"optimizer{oi}.group{gi}.lr" for oi, opt in enumerate(optimizers)
                for gi in range(len(opt.param_groups))]
    live = {**_graph_tensors(g), **_optimizer_tensors(optimizers, names),
            **{n: b.tensor for n, b in zip(lr_names, bindings)}}
    _bind_all(graphs, live)
    walks = [module_tree(root) for root in g._modules.values()]
    versions = tuple((opt._version, hyper_parameters(opt)) for opt in optimizers)
    opts = saved.options(g.config)
    for rec, gs in zip(records, graphs):
        exe = saved.executable(gs["graph"], opts)
        entry = _TrainEntry(exe, rec["tree"], rec["n_user"], rec["n_out"],
                            [live[p] for p in rec["grad_params"]], bindings,
                            dict(rec["report"], loaded_from=str(path)), None)
        for i, saved_key in enumerate(rec["keys"]):
            key = _live_key(saved_key, (g.config.version, versions, tuple(w.key for w in walks)))
            entry.walks, entry.key = walks, key
            g._cache.adopt(key, entry, None if i else f"loaded from {path}")
    g._warmed = g._warmed or warmed
    g._last = g._cache.newest
