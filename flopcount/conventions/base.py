"""What a counting convention is: module rules (eager view) and op rules (graph view).

A module rule is ``rule(module, inputs, output) -> Cost`` where ``inputs`` are the positional
arguments of the call and ``output`` its result, with every tensor replaced by its ``Spec``
(shape, dtype, device): rules read shapes and the module's attributes, never data. A rule
marked :func:`with_kwargs` is ``rule(module, inputs, output, kwargs)`` and also sees the
keyword arguments (masks passed to attention by name). An input computed from constants only
(a mask built inside the model) is a :class:`ConstantSpec`: a graph folds the ops on it, so a
rule leaves them out. A module rule covers the module's whole subtree. An op rule is
``rule(out, *inputs, **attrs) -> Cost`` over specs, like an op's own ``cost``.

Module rules match the module's type exactly (a subclass of ``Linear`` with its own forward is
not a ``Linear``); the lookup resolves class names in ``flopcount.runtime.nn`` when first used,
so layers that do not exist (yet) are simply absent.
"""

from __future__ import annotations

from math import prod
from typing import Callable

from ..runtime.registry import Cost, Spec


class ConstantSpec(Spec):
    """The spec of a module input computed from constants only (no model input, parameter or
    buffer behind it): a graph folds the ops that read only such values."""

    __slots__ = ()


def is_constant(spec) -> bool:
    return isinstance(spec, ConstantSpec)


def with_kwargs(rule: Callable) -> Callable:
    """Mark a module rule that also takes the call's keyword arguments (as specs):
    ``rule(module, inputs, output, kwargs)``, like a forward hook registered ``with_kwargs``."""
    rule.with_kwargs = True
    return rule


def takes_kwargs(rule: Callable) -> bool:
    """Was ``rule`` marked :func:`with_kwargs`?"""
    return getattr(rule, "with_kwargs", False)


def numel(spec) -> int:
    return prod(spec.shape)


def first_tensor(value):
    """The first spec in a (possibly nested) output: ``(out, (h, c))`` gives ``out``."""
    if isinstance(value, (tuple, list)):
        for v in value:
            found = first_tensor(v)
            if found is not None:
                return found
        return None
    return value if hasattr(value, "shape") else None


class Convention:
    """A named set of module rules and op rules, and the policies that differ between
    conventions (the views read them here, never a convention's name).

    ``module_rules`` maps a class name of ``flopcount.runtime.nn`` (or a class) to a rule;
    ``op_rule(op)`` returns the rule for a registered op class, or ``None`` when the convention
    has none (the op is then listed as unsupported). ``counts_functional``: whether the eager
    total includes the ops a module's ``forward`` runs directly (a residual ``out + x``); where
    it does not (ptflops' hooks), they are listed as "seen, not counted" and the leaf modules
    without a rule are the unsupported ones.
    """

    name = "?"
    counts_functional = True

    def __init__(self, module_rules: dict, overrides: dict | None = None):
        self._named_rules = dict(module_rules)
        self._overrides = dict(overrides or {})
        self._by_type: dict | None = None

    # --- module rules ---------------------------------------------------------------------
    def _resolve(self) -> dict:
        if self._by_type is None:
            from ..runtime import nn

            table = {}
            for key, rule in self._named_rules.items():
                cls = getattr(nn, key, None) if isinstance(key, str) else key
                if isinstance(cls, type):
                    table[cls] = rule
            table.update(self._overrides)
            self._by_type = table
        return self._by_type

    def module_rule(self, module) -> Callable | None:
        """The rule for ``module``'s exact type, or ``None``."""
        return self._resolve().get(type(module))

    def module_rules(self, modules) -> list:
        """``module_rule`` of each of ``modules``, in one pass (one table lookup each)."""
        if type(self).module_rule is not Convention.module_rule:  # a subclass decides its own way
            return [self.module_rule(m) for m in modules]
        table = self._resolve()
        return [table.get(type(m)) for m in modules]

    def module_types(self) -> list:
        """The classes this convention has a module rule for."""
        return list(self._resolve())

    def with_modules(self, custom: dict | None = None, ignore=()) -> "Convention":
        """A copy with extra module rules (``{cls: rule}``) and types counted as zero."""
        overrides = dict(self._overrides)
        overrides.update(custom or {})
        for cls in ignore:
            overrides[cls] = zero_rule
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._overrides = overrides
        clone._by_type = None
        return clone

    # --- op rules -------------------------------------------------------------------------
    def op_rule(self, op) -> Callable | None:
        raise NotImplementedError

    def op_cost(self, op, out, inputs, attrs, own: Cost | None = None) -> Cost | None:
        """The op's cost in this convention; bytes always come from the op's own rule
        (``own``, when the caller has already computed it)."""
        rule = self.op_rule(op)
        if rule is None:
            return None
        if own is None:
            own = op.cost(out, *inputs, **attrs)
        counted = rule(out, *inputs, **attrs)
        return Cost(counted.macs, counted.flops, own.bytes_read, own.bytes_written)

    def op_costs(self, calls, own_costs: list) -> list:
        """``op_cost`` of every op call (``calls[i].op``, ``.output_spec``, ``.inputs``, ``.attrs``:
        a ``pricing.OpCall`` or a recorded event), given their own costs: one call for a whole run."""
        op_cost = self.op_cost
        return [op_cost(c.op, c.output_spec, c.inputs, c.attrs, own) for c, own in zip(calls, own_costs)]


def zero_rule(module, inputs, output) -> Cost:
    """A module that costs nothing (containers, views, ignored types)."""
    return Cost()


def macs_only(macs: int) -> Cost:
    """A ptflops-style count: MACs, and FLOPs as 2 per MAC."""
    return Cost(macs=int(macs), flops=2 * int(macs))
