"""`flow.graph.save(module, path, optimizer)` / `flow.graph.load(module, path, optimizer)`: the
compiled calls of a GRAPH-mode module (forward-only and joint forward/backward entries) and,
with an optimizer, its compiled GRAPH-mode steps (`graph/capture/optim_step.py`), so a restarted
training loop under `flow.set_mode(flow.GRAPH)` replays from its first step. The file format,
the checks and the order (check everything, then load state, then install) are those of
`nn.Graph.save` (`graph_save.py`).
"""
from __future__ import annotations

from dualflow.graph.capture import optim_step, saved
from dualflow.graph.capture.compiled_call import CompiledCall
from dualflow.graph.ir.serialize import Decoder, Encoder, SerializeError
from dualflow.graph.ir.serialize_types import rename_symbols
from dualflow.tensor import Tensor

from .compiled import CompiledModule
from .graph_mode import ForwardEntry, JointEntry, module_tree
from .graph_save import (_bind_all, _by_array, _by_entry, _check_keys, _check_same,
                         _check_state_dict, _dry_run_optimizers, _live_key, _named_tensors,
                         _portable_key, _saved_key, _symbols_made_equal, _tree_facts)
from .graph_entry_check import check_joint, check_train
from .graph_update_check import Reference, check_optimizers, check_updates, optimizer_facts


def _module_names(module) -> dict:
    """Names a GRAPH-mode trace gives the module's tensors: plain, or under the class name when
    the module itself is activation-checkpointed."""
    plain = _named_tensors(module)
    return {**plain, **{f"{type(module).__name__}.{n}": t for n, t in plain.items()}}


def _call_record(enc: Encoder, entry, keys: list, names: dict, what: str, same: dict) -> dict:
    """A compiled call as data; `same`: the symbols its trace's guards made equal."""
    if entry.effects:
        raise SerializeError(f"flow.graph.save: {what} assigns module attributes or changes its "
                             "arguments in place, which a file cannot replay yet")
    rec = {"keys": [[_portable_key(enc, k), enc.value(k[-5:-3], "cache key")] for k in keys],
           "tree": enc.value(entry.tree, f"{what} output"), "n_user": entry.n_user}
    if isinstance(entry, JointEntry):
        rec.update(kind="joint", fwd=rename_symbols(enc.graph(entry.fwd.graph), same),
                   bwd=rename_symbols(enc.graph(entry.bwd.graph), same),
                   n_out=entry.n_out, n_res=entry.n_res,
                   params=[names[id(p)] for p in entry.params],
                   input_positions=entry.input_positions, diff_positions=entry.diff_positions,
                   have=entry.have)
    else:
        rec.update(kind="forward", fwd=rename_symbols(enc.graph(entry.exe.graph), same))
    return rec


def _step_record(enc: Encoder, entry, keys: list, names: dict) -> dict:
    """A compiled optimizer step: its graph names parameters `param{i}`, their state
    `param{i}.{k}` and group learning rates `group{i}.lr` (optim_step._compile)."""
    grads, _, state_keys, _, _ = keys[0]
    if len(keys) > 1 or any(t.__module__ != "numpy" for _, _, t in grads):
        raise SerializeError("flow.graph.save: only CPU optimizer steps compiled for one "
                             "signature can be saved")
    return {"grads": enc.value(tuple((s, d) for s, d, _ in grads), "gradient types"),
            "state_keys": enc.value(state_keys, "optimizer state keys"),
            "live": [_name_of(p, names) for p in entry.live], "graph": enc.graph(entry.exe.graph)}


def _name_of(p, names: dict) -> str:
    if id(p) not in names:
        raise SerializeError(f"flow.graph.save: the optimizer updates a {tuple(p.shape)} "
                             "parameter that is not the module's")
    return names[id(p)]


def _compiled_module(module):
    """The module whose calls compile: `flow.compile(model)` compiles `model`'s."""
    return module._orig_mod if isinstance(module, CompiledModule) else module


def save_module(module, path, optimizer=None) -> None:
    module = _compiled_module(module)
    cache = module.__dict__.get("_graph_cache")
    name = type(module).__name__
    if cache is None or not cache.items():
        raise RuntimeError(f"flow.graph.save: {name} has no compiled calls yet; call it under "
                           "flow.set_mode(flow.GRAPH) (or flow.compile) first")
    tensors = _named_tensors(module)
    enc = Encoder(_by_array(tensors))
    names = {id(t): n for n, t in tensors.items()}
    same = _symbols_made_equal(cache)
    records = [_call_record(enc, entry, keys, names, f"{name}.forward", same.get(id(entry)))
               for entry, keys in _by_entry(cache)]
    steps = optim_step._calls.get(optimizer) if optimizer is not None else None
    step_records = [_step_record(enc, entry, keys, names)
                    for entry, keys in (_by_entry(steps) if steps is not None else [])]
    optimizers = [optimizer] if optimizer is not None else []
    structure = {"class": name, "tree": _tree_facts(enc, {"": module}), "entries": records,
                 "steps": step_records, "optimizers": optimizer_facts(optimizers)}
    state = {"model": module.state_dict(),
             "optimizers": [opt.state_dict() for opt in optimizers]}
    saved.write(path, "module", structure, enc.arrays, state)


def _step_tensors(opt, live: list, bindings: list) -> dict:
    out = {f"group{i}.lr": b.tensor for i, b in enumerate(bindings)}
    for i, p in enumerate(live):
        out[f"param{i}"] = p
        out.update({f"param{i}.{k}": t for k, t in opt.state.get(p, {}).items()
                    if isinstance(t, Tensor)})
    return out


def load_module(module, path, optimizer=None) -> None:
    module = _compiled_module(module)
    name = type(module).__name__
    where = f"flow.graph.load({name}, {str(path)!r})"
    structure, arrays, state = saved.read(path, "module")
    dec = Decoder(arrays)
    optimizers = [optimizer] if optimizer is not None else []
    tensors = _module_names(module)
    try:
        if structure["class"] != name:
            raise SerializeError(f"{where}: the file was saved from a {structure['class']}")
        _check_same(structure["tree"], _tree_facts(Encoder(), {"": module}), where)
        _check_state_dict(state.get("model"), module.state_dict(), where)
        check_optimizers(structure["optimizers"], optimizers, state.get("optimizers"), where)
        trials = _dry_run_optimizers(optimizers, state.get("optimizers"), where)
        records = [_read_call(dec, r) for r in structure["entries"]]
        steps = [_read_step(dec, r) for r in (structure["steps"] if optimizers else [])]
        if any(p not in tensors for r in records + steps for p in r["params"]):
            raise SerializeError(f"{where}: a saved graph names a parameter the model does not "
                                 "have")
    except SerializeError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise SerializeError(f"{where}: malformed file structure ({exc})") from None
    for r in records:
        _check_keys(r["graphs"]["fwd"], [k for k, _ in r["keys"]], where)
        if r["joint"]:
            check_joint(r["graphs"]["fwd"], r["graphs"]["bwd"], r,
                        [tensors[p] for p in r["params"]], where)
        else:
            check_train(r["graphs"]["fwd"], r["tree"], r["n_user"], r["n_user"], [], where)
    _bind_all([r["graphs"] for r in records], tensors)   # names and types checked before
    for r in steps:                                        # anything changes
        live = [tensors[p] for p in r["params"]]
        _check_step_updates(r["graphs"]["graph"], trials[0], live, where)
        groups = [optim_step.LrBinding(g) for g in trials[0].param_groups]
        _bind_all([r["graphs"]], _step_tensors(trials[0], live, groups))

    module.load_state_dict(state["model"])
    for opt, sd in zip(optimizers, state["optimizers"]):
        opt.load_state_dict(sd)
    _install_calls(module, path, records, tensors)
    for r in steps:
        _install_step(optimizer, path, r, [tensors[p] for p in r["params"]])


def _check_step_updates(graph, opt, live: list, where: str) -> None:
    """A compiled step's writes against the optimizer's update (named as optim_step names them:
    `param{i}`, `param{i}.{k}`, `group{i}.lr`)."""
    index = {id(p): i for i, p in enumerate(live)}

    def name(p):
        return f"param{index[id(p)]}" if id(p) in index else None
    check_updates(graph, Reference(opt, name, lambda p, k: f"{name(p)}.{k}",
                                   lambda gi: f"group{gi}.lr"), where)


def _read_call(dec: Decoder, r: dict) -> dict:
    """A saved call decoded and checked (graphs verified), before anything is loaded."""
    joint = r["kind"] == "joint"
    return {"joint": joint, "graphs": {f: dec.graph(r[f]) for f in (("fwd", "bwd") if joint
                                                                      else ("fwd",))},
            "keys": [(_saved_key(dec, k), dec.value(middle)) for k, middle in r["keys"]],
            "tree": dec.value(r["tree"]), "n_user": int(r["n_user"]),
            "params": [str(p) for p in r.get("params", ())],
            **({k: int(r[k]) for k in ("n_out", "n_res")} if joint else {}),
            **({k: [int(i) for i in r[k]] for k in ("input_positions", "diff_positions", "have")}
               if joint else {})}


def _read_step(dec: Decoder, r: dict) -> dict:
    return {"graphs": {"graph": dec.graph(r["graph"])}, "params": [str(p) for p in r["live"]],
            "grads": dec.value(r["grads"]), "state_keys": dec.value(r["state_keys"])}


def _install_calls(module, path, records: list, tensors: dict) -> None:
    name = type(module).__name__
    cache = module.__dict__.get("_graph_cache")
    if cache is None:
        cache = module.__dict__["_graph_cache"] = CompiledCall(name)
    walk = module_tree(module)
    opts = saved.options()
    for rec in records:
        fwd = saved.executable(rec["graphs"]["fwd"], opts)
        if rec["joint"]:
            entry = JointEntry(fwd, saved.executable(rec["graphs"]["bwd"], opts), rec["tree"],
                               rec["n_user"], rec["n_out"], rec["n_res"],
                               [tensors[p] for p in rec["params"]], rec["input_positions"],
                               rec["diff_positions"], rec["have"], name, None)
        else:
            entry = ForwardEntry(fwd, rec["tree"], rec["n_user"], None)
        for i, (saved_key, middle) in enumerate(rec["keys"]):
            key = _live_key(saved_key, middle + (walk.key,))
            entry.walks, entry.key = [walk], key
            cache.adopt(key, entry, None if i else f"loaded from {path}")


def _install_step(opt, path, rec: dict, live: list) -> None:
    """Bind a compiled step to the loaded optimizer and file it under the key its next
    `step()` computes (optim_step._signature)."""
    bindings = [optim_step.LrBinding(g) for g in opt.param_groups]
    graph = rec["graphs"]["graph"]
    _bind_all([rec["graphs"]], _step_tensors(opt, live, bindings))
    entry = optim_step._StepEntry(saved.executable(graph, saved.options()), live, bindings)
    grads = tuple((tuple(s), d, type(p._data)) for (s, d), p in zip(rec["grads"], live))
    key = (grads, optim_step.hyper_parameters(opt), rec["state_keys"], opt._version,
           tuple(id(p) for p in live))
    calls = optim_step._calls.get(opt)
    if calls is None:
        calls = optim_step._calls[opt] = CompiledCall(f"{type(opt).__name__}.step")
    calls.adopt(key, entry, f"loaded from {path}")


saved.register_module_io(save_module, load_module)
