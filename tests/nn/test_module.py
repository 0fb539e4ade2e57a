"""nn.Module, nn.Parameter and the containers: registration, naming, state_dict, hooks, modes,
movement and printing (torch-free)."""
import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import dualflow as flow
from dualflow import nn
from dualflow.nn import module as module_mod


class Scale(nn.Module):
    """y = x * w + b, with a persistent and a non-persistent buffer."""

    def __init__(self, n=3):
        super().__init__()
        self.w = nn.Parameter(flow.ones(n))
        self.b = nn.Parameter(flow.zeros(n))
        self.register_buffer("count", flow.zeros(1))
        self.register_buffer("scratch", flow.zeros(n), persistent=False)

    def forward(self, x):
        return x * self.w + self.b


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Scale()
        self.body = nn.Sequential(Scale(), Scale())
        self.head = Scale()

    def forward(self, x):
        return self.head(self.body(self.first(x)))


def _values(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


# ---- Parameter -----------------------------------------------------------------------------------
def test_parameter_shares_storage_and_requires_grad():
    t = flow.zeros(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, flow.Tensor) and p.requires_grad and p.is_leaf
    t.fill_(5.0)
    assert p.detach().numpy()[0, 0] == 5.0
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(nn.Parameter(flow.tensor([1.0, 2.0]))) == \
        "Parameter containing:\ntensor([1., 2.], requires_grad=True)"


def test_parameter_rejects_non_tensors_and_integer_grads():
    with pytest.raises(TypeError, match="Tensor"):
        nn.Parameter(np.zeros(3))
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(flow.tensor([1, 2]))


def test_parameter_survives_deepcopy_and_pickle():
    p = nn.Parameter(flow.tensor([1.0, 2.0]))
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert isinstance(q, nn.Parameter) and q.requires_grad
        np.testing.assert_array_equal(q.detach().numpy(), [1.0, 2.0])
        q.detach().fill_(0.0)
        assert p.detach().numpy()[0] == 1.0


# ---- registration and naming ---------------------------------------------------------------------
def test_named_members_follow_registration_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["first.w", "first.b", "body.0.w", "body.0.b", "body.1.w", "body.1.b",
                     "head.w", "head.b"]
    assert [n for n, _ in net.named_buffers()] == [
        "first.count", "first.scratch", "body.0.count", "body.0.scratch", "body.1.count",
        "body.1.scratch", "head.count", "head.scratch"]
    assert [n for n, _ in net.named_modules()] == ["", "first", "body", "body.0", "body.1", "head"]
    assert [n for n, _ in net.named_children()] == ["first", "body", "head"]
    assert [n for n, _ in net.named_parameters(prefix="net")][0] == "net.first.w"
    assert list(net.named_parameters(recurse=False)) == []
    assert len(list(net.parameters())) == 8 and len(list(net.modules())) == 6


def test_shared_parameters_and_modules_are_deduplicated():
    net = Net()
    net.head.w = net.first.w
    net.tail = net.first
    assert len(list(net.parameters())) == 7
    assert len(list(net.named_parameters(remove_duplicate=False))) == 10
    assert [n for n, _ in net.named_modules()].count("tail") == 0
    assert "tail.w" in net.state_dict()


def test_setattr_getattr_delattr_route_through_the_tables():
    m = Scale()
    assert m.w is m._parameters["w"] and m.count is m._buffers["count"]
    m.count = flow.ones(1)              # a tensor assigned to a buffer name stays a buffer
    assert m._buffers["count"].numpy()[0] == 1.0
    m.w = None                          # parameters may be set to None
    assert m.w is None and "w" not in m.state_dict()
    with pytest.raises(TypeError, match="parameter 'b'"):
        m.b = flow.zeros(3)
    with pytest.raises(TypeError, match="buffer 'count'"):
        m.count = 3.0
    m.child = Scale()
    with pytest.raises(TypeError, match="child module"):
        m.child = 3
    del m.child, m.count
    assert "child" not in m._modules and "count" not in m._buffers
    m.plain = flow.zeros(2)             # a plain tensor attribute is not registered
    assert "plain" not in m.state_dict()
    with pytest.raises(AttributeError, match="'Scale' object has no attribute 'nope'"):
        m.nope


def test_registration_errors():
    m = Scale()
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("forward", flow.zeros(1))
    with pytest.raises(KeyError, match="attribute 'w' already exists"):
        m.register_buffer("w", flow.zeros(1))          # a parameter's name
    with pytest.raises(KeyError, match=r'"\."'):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="buffer"):
        m.register_buffer("x", [1, 2])
    with pytest.raises(ValueError, match="non-leaf"):
        m.register_parameter("y", _non_leaf_parameter())

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(flow.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def _non_leaf_parameter():
    p = nn.Parameter(flow.ones(2))
    p.grad_fn = (flow.ones(2, requires_grad=True) * 2).grad_fn
    return p


def test_get_submodule_parameter_buffer():
    net = Net()
    assert net.get_submodule("body.1") is net.body[1]
    assert net.get_submodule("") is net
    assert net.get_parameter("body.0.w") is net.body[0].w
    assert net.get_buffer("head.count") is net.head.count
    with pytest.raises(AttributeError, match="no submodule `nope`"):
        net.get_submodule("body.nope")
    with pytest.raises(AttributeError, match="no parameter `count`"):
        net.get_parameter("head.count")


# ---- state_dict ------------------------------------------------------------------------------------
def test_state_dict_holds_detached_tensors_sharing_storage():
    m = Scale()
    sd = m.state_dict()
    assert list(sd) == ["w", "b", "count"]           # the non-persistent buffer is left out
    assert isinstance(sd, OrderedDict) and not sd["w"].requires_grad
    assert not isinstance(sd["w"], nn.Parameter)
    sd["w"].fill_(7.0)
    assert m.w.detach().numpy()[0] == 7.0
    assert m.state_dict(keep_vars=True)["w"] is m.w
    assert list(m.state_dict(prefix="m.")) == ["m.w", "m.b", "m.count"]


def test_state_dict_round_trip_keeps_identity():
    src, dst = Net(), Net()
    for i, p in enumerate(src.parameters()):
        p.detach().fill_(float(i))
    src.head.count.fill_(3.0)
    params_before = list(dst.parameters())
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert all(a is b for a, b in zip(params_before, dst.parameters()))
    for k, v in _values(src).items():
        np.testing.assert_array_equal(dst.state_dict()[k].numpy(), v)
    x = flow.tensor([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(dst(x).detach().numpy(), src(x).detach().numpy())


def test_load_accepts_numpy_arrays_and_casts_dtype():
    m = Scale()
    m.load_state_dict({"w": np.full(3, 2.0), "b": np.zeros(3), "count": np.ones(1)})
    assert m.w.dtype is flow.float32 and m.w.detach().numpy()[1] == 2.0


def test_strict_mismatch_lists_missing_and_unexpected_keys():
    m = Net()
    sd = m.state_dict()
    del sd["body.0.w"], sd["head.count"]
    sd["extra.weight"] = flow.zeros(1)
    with pytest.raises(RuntimeError) as err:
        m.load_state_dict(sd)
    msg = str(err.value)
    assert 'Missing key(s) in state_dict: "body.0.w", "head.count".' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight".' in msg
    assert "Net" in msg
    result = m.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["body.0.w", "head.count"]
    assert result.unexpected_keys == ["extra.weight"]


def test_shape_mismatch_names_key_and_both_shapes_even_when_not_strict():
    m = Scale()
    sd = m.state_dict()
    sd["b"] = flow.zeros(4)
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for b: copying a param with shape "
                                               r"\(4,\) from checkpoint, the shape in current "
                                               r"model is \(3,\)"):
            m.load_state_dict(sd, strict=strict)


def test_failed_load_leaves_the_model_untouched():
    m = Net()
    before = _values(m)
    good = {k: flow.full(tuple(v.shape), 9.0) for k, v in m.state_dict().items()}
    for broken in ({**good, "head.b": flow.zeros(5)},          # the last key has a bad shape
                   {**good, "unknown": flow.zeros(1)},         # strict: an unexpected key
                   {**good, "head.w": "not a tensor"}):        # a value that is no tensor
        with pytest.raises(RuntimeError):
            m.load_state_dict(broken)
        for k, v in _values(m).items():
            np.testing.assert_array_equal(v, before[k])


def test_load_with_assign_replaces_tensors():
    m = Scale()
    new_w = flow.full((3,), 4.0)
    m.load_state_dict({"w": new_w, "b": flow.zeros(3), "count": flow.zeros(1)}, assign=True)
    assert isinstance(m.w, nn.Parameter) and m.w.requires_grad
    new_w.fill_(5.0)
    assert m.w.detach().numpy()[0] == 5.0


# ---- calling and hooks ----------------------------------------------------------------------------
def test_forward_hooks_modify_inputs_and_outputs_and_can_be_removed():
    m = Scale()
    calls = []
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    post = m.register_forward_hook(lambda mod, args, out: calls.append(args[0].numpy()) or out + 1)
    x = flow.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(m(x).detach().numpy(), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(calls[0], [2.0, 4.0, 6.0])   # forward hooks see the new input
    pre.remove()
    post.remove()
    np.testing.assert_array_equal(m(x).detach().numpy(), [1.0, 2.0, 3.0])
    assert len(calls) == 1


def test_hook_order_prepend_kwargs_and_context_manager():
    m = Scale()
    order = []
    m.register_forward_hook(lambda *a: order.append("a"))
    m.register_forward_hook(lambda *a: order.append("b"), prepend=True)
    with m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"x": kwargs["x"] * 0}),
                                     with_kwargs=True):
        out = m(x=flow.ones(3))
    np.testing.assert_array_equal(out.detach().numpy(), [0, 0, 0])
    assert order == ["b", "a"]
    np.testing.assert_array_equal(m(x=flow.ones(3)).detach().numpy(), [1, 1, 1])


def test_missing_forward_raises():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_graph_mode_routes_calls_through_the_installed_hook(monkeypatch):
    seen = []
    monkeypatch.setattr(module_mod, "_graph_call",
                        lambda mod, args, kwargs: seen.append((mod, args, kwargs)) or "compiled")
    m = Scale()
    x = flow.ones(3)
    assert isinstance(m(x), flow.Tensor) and not seen           # eager mode: the module runs
    with flow.mode(flow.GRAPH):
        assert m(x, k=1) == "compiled"
    assert seen == [(m, (x,), {"k": 1})]


# ---- modes, gradients and movement ------------------------------------------------------------------
def test_train_eval_propagate():
    net = Net()
    assert net.training and net.body[1].training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError):
        net.train("no")

    class FrozenNorm(Scale):                  # a child that overrides train() stays in eval
        def train(self, mode=True):
            return super().train(False)
    net.head = FrozenNorm()
    net.train()
    assert net.training and not net.head.training


def test_zero_grad_requires_grad_and_apply():
    m = Scale()
    (m(flow.ones(3)) * 2).sum().backward()
    np.testing.assert_array_equal(m.w.grad.numpy(), [2, 2, 2])
    m.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(m.w.grad.numpy(), [0, 0, 0])
    m.zero_grad()
    assert m.w.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    net, visited = Net(), []
    net.apply(lambda mod: visited.append(type(mod).__name__))
    assert visited == ["Scale", "Scale", "Scale", "Sequential", "Scale", "Net"]


def test_to_dtype_keeps_tensor_identity_and_skips_integer_buffers():
    m = Scale()
    m.register_buffer("steps", flow.tensor(0))
    w = m.w
    (m(flow.ones(3))).sum().backward()
    assert m.double() is m and m.w is w
    assert m.w.dtype is flow.float64 and m.w.grad.dtype is flow.float64
    assert m.count.dtype is flow.float64 and m.steps.dtype is flow.int64
    m.to(flow.float32)
    assert m.w.dtype is flow.float32
    m.half().float()
    assert m.w.dtype is flow.float32
    m.to("cpu").cpu()
    assert m.w.device == flow.device("cpu")
    with pytest.raises(TypeError, match="floating point"):
        m.to(flow.int64)


# ---- printing -------------------------------------------------------------------------------------
def test_repr_nests_children_and_extra_repr():
    class Leaf(nn.Module):
        def extra_repr(self):
            return "size=3"

    class TwoLines(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"

    root = nn.Sequential(OrderedDict(leaf=Leaf(), inner=nn.Sequential(Leaf()), two=TwoLines()))
    assert repr(root) == (
        "Sequential(\n"
        "  (leaf): Leaf(size=3)\n"
        "  (inner): Sequential(\n"
        "    (0): Leaf(size=3)\n"
        "  )\n"
        "  (two): TwoLines(\n"
        "    a=1\n"
        "    b=2\n"
        "  )\n"
        ")")
    assert repr(nn.ModuleList([Leaf(), Leaf(), TwoLines()])) == (
        "ModuleList(\n  (0-1): 2 x Leaf(size=3)\n  (2): TwoLines(\n    a=1\n    b=2\n  )\n)")


# ---- containers -----------------------------------------------------------------------------------
def test_sequential_indexing_slicing_and_editing():
    a, b, c = Scale(), Scale(), Scale()
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]              # slices keep the names
    d = Scale()
    seq.append(d)
    assert seq[3] is d
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"] and seq[0] is b
    seq[0] = a
    assert seq[0] is a
    with pytest.raises(IndexError, match="out of range"):
        seq[7]
    named = nn.Sequential(OrderedDict(first=a, second=b))
    assert named.first is a and list(named._modules) == ["first", "second"]
    x = flow.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(named(x).detach().numpy(), x.numpy())
    assert len(seq + named) == 5


def test_module_list_and_dict():
    layers = nn.ModuleList([Scale() for _ in range(2)])
    layers.extend([Scale()])
    layers.insert(0, Scale())
    layers += [Scale()]
    assert len(layers) == 5 and len(list(layers.parameters())) == 10
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    first = layers.pop(0)
    assert isinstance(first, Scale) and len(layers) == 4 and list(layers._modules)[-1] == "3"
    table = nn.ModuleDict({"a": Scale(), "b": Scale()})
    table["c"] = Scale()
    assert list(table) == ["a", "b", "c"] and "b" in table and len(table) == 3
    assert [n for n, _ in table.named_parameters()][:2] == ["a.w", "a.b"]
    table.pop("a")
    assert list(table.keys()) == ["b", "c"]
    with pytest.raises(TypeError):
        nn.ModuleList([3])


def test_parameter_list_and_dict_wrap_tensors():
    plist = nn.ParameterList([flow.ones(2), nn.Parameter(flow.zeros(3, 2))])
    plist.append(flow.ones(1))
    assert len(plist) == 3 and all(isinstance(p, nn.Parameter) for p in plist)
    assert [n for n, _ in plist.named_parameters()] == ["0", "1", "2"]
    assert "(1): Parameter containing: [dualflow.float32 of size 3x2]" in repr(plist)
    pdict = nn.ParameterDict({"x": flow.ones(2)})
    pdict["y"] = flow.zeros(2)
    assert list(pdict) == ["x", "y"] and isinstance(pdict["y"], nn.Parameter)
    assert list(pdict.state_dict()) == ["x", "y"]
    del pdict["x"]
    assert list(pdict.keys()) == ["y"] and len(pdict) == 1


def test_modules_deepcopy_and_pickle_with_independent_weights():
    net = Net()
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert list(clone.state_dict()) == list(net.state_dict())
        clone.first.w.detach().fill_(3.0)
        assert net.first.w.detach().numpy()[0] == 1.0
        assert isinstance(clone.first.w, nn.Parameter)
