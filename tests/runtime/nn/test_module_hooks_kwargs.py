"""Forward hooks with keyword arguments, ``prepend`` and ``always_call``, as PyTorch's: the same
hooks registered on a flopcount module and on a torch module log the same calls."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import nn
from flopcount.runtime.nn.modules import module as module_mod


class Scale(nn.Module):
    """forward(x, *, factor=1.0, fail=False): keyword arguments to see in hooks."""

    def forward(self, x, factor=1.0, fail=False):
        if fail:
            raise ValueError("forward failed")
        return x * factor


def _value(x) -> float:
    return float(np.asarray(x.numpy() if hasattr(x, "numpy") else x).sum())


def _register(m, lib, log):
    """The same hooks on a flopcount or torch module ``m`` (``lib`` is rt.nn or torch.nn)."""
    register_global = lib.modules.module.register_module_forward_hook
    return [
        m.register_forward_pre_hook(lambda mod, args: log.append(("pre", _value(args[0])))),
        m.register_forward_pre_hook(lambda mod, args, kwargs: log.append(("pre kw", sorted(kwargs))),
                                    with_kwargs=True),
        # replaces the keyword arguments: the factor becomes 3
        m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {**kwargs, "factor": 3.0}),
                                    with_kwargs=True),
        m.register_forward_pre_hook(lambda mod, args: log.append("first pre"), prepend=True),
        m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("post kw", kwargs["factor"],
                                                                           _value(out))), with_kwargs=True),
        m.register_forward_hook(lambda mod, args, out: log.append(("post", _value(out)))),
        m.register_forward_hook(lambda mod, args, out: log.append("first post"), prepend=True),
        register_global(lambda mod, args, kwargs, out: log.append(("global kw", sorted(kwargs))),
                        with_kwargs=True),
    ]


def _torch_scale(torch):
    """Scale written against torch."""

    class TorchScale(torch.nn.Module):
        def forward(self, x, factor=1.0, fail=False):
            if fail:
                raise ValueError("forward failed")
            return x * factor

    return TorchScale()


def test_hooks_see_and_replace_keyword_arguments_as_torch_does():
    torch = pytest.importorskip("torch")
    ours, theirs = [], []
    m, tm = Scale(), _torch_scale(torch)
    handles = _register(m, nn, ours) + _register(tm, torch.nn, theirs)
    try:
        out = m(rt.ones(2), factor=2.0)
        expected = tm(torch.ones(2), factor=2.0)
    finally:
        for h in handles:
            h.remove()
    assert ours == theirs
    # order: prepended pre-hook, pre-hooks in order, forward with the replaced factor, the global
    # hook, the prepended hook, the module's hooks in order
    assert ours == ["first pre", ("pre", 2.0), ("pre kw", ["factor"]), ("global kw", ["factor"]), "first post",
                    ("post kw", 3.0, 6.0), ("post", 6.0)]
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_a_kwargs_pre_hook_must_return_args_and_kwargs():
    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match="tuple of \\(new_args, new_kwargs\\)"):
        m(rt.ones(2), factor=2.0)


def test_always_called_hooks_run_when_forward_raises():
    torch = pytest.importorskip("torch")
    logs = {}
    for lib, mod, x in ((nn, Scale(), rt.ones(1)), (torch.nn, _torch_scale(torch), torch.ones(1))):
        log = logs.setdefault(lib.__name__, [])
        mod.register_forward_hook(lambda m, args, out: log.append(("always", out)), always_call=True)
        mod.register_forward_hook(lambda m, args, kwargs, out: log.append(("always kw", sorted(kwargs), out)),
                                  with_kwargs=True, always_call=True)
        mod.register_forward_hook(lambda m, args, out: log.append("not on error"))
        with pytest.raises(ValueError, match="forward failed"):
            mod(x, fail=True)
    assert logs["flopcount.runtime.nn"] == logs["torch.nn"] == [("always", None), ("always kw", ["fail"], None)]


def test_an_always_called_hook_that_fails_after_an_error_only_warns():
    m = Scale()

    def broken(mod, args, out):
        raise KeyError("hook")

    m.register_forward_hook(broken, always_call=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="forward failed"):
            m(rt.ones(1), fail=True)
    assert any("always_call=True" in str(w.message) for w in caught)


def test_removing_handles_clears_every_flag():
    m = Scale()
    handles = [m.register_forward_pre_hook(lambda *a: None, with_kwargs=True),
               m.register_forward_hook(lambda *a: None, with_kwargs=True, always_call=True),
               nn.register_module_forward_hook(lambda *a: None, with_kwargs=True, always_call=True)]
    assert m._forward_pre_hooks_with_kwargs and m._forward_hooks_always_called
    for h in handles:
        h.remove()
    assert not (m._forward_pre_hooks or m._forward_hooks or m._forward_pre_hooks_with_kwargs
                or m._forward_hooks_with_kwargs or m._forward_hooks_always_called)
    assert not (module_mod._global_forward_hooks or module_mod._global_forward_hooks_with_kwargs
                or module_mod._global_forward_hooks_always_called)


def test_no_hooks_keeps_the_fast_path(monkeypatch):
    def slow_path(*args):
        raise AssertionError("the hook path ran without hooks")

    monkeypatch.setattr(nn.Module, "_call_with_hooks", slow_path)
    assert _value(Scale()(rt.ones(2), factor=2.0)) == 4.0
    with pytest.raises(AssertionError, match="hook path"):
        m = Scale()
        m.register_forward_hook(lambda *a: None)
        m(rt.ones(2))


def test_hooks_active_answers_for_every_kind_of_hook():
    # the question graph mode asks before replaying a compiled graph instead of module calls
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    assert not nn.hooks_active() and not nn.hooks_active(net)
    with net[1].register_forward_pre_hook(lambda m, args: None):
        assert nn.hooks_active(net) and not nn.hooks_active()
    with nn.register_module_forward_hook(lambda m, args, out: None):
        assert nn.hooks_active() and nn.hooks_active(net)

    class Passing:
        def record_call(self, module, args, kwargs):
            return module.forward(*args, **kwargs)

    with nn.observe_module_calls(Passing()):
        assert nn.hooks_active()
    assert not nn.hooks_active(net)
