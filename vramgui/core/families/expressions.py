"""The small expression language of the architecture table, compiled to closures.

Tensor sizes, block counts and conditions in ``architectures.json`` are Python expressions over a
model's config attributes: ``2 * num_attention_heads * head_dim``, ``intermediate_size[i]``,
``layer_types[i] == 'linear_attention' and not attention_bias``, ``len(layers_block_type)``.
Attributes of a sub-config are dotted (``text_config.hidden_size``); ``i`` and ``j`` are the block
indices of the tensor being sized. Only arithmetic, comparisons, boolean logic, conditionals,
subscripts, ``len``, ``range``, ``int`` and literals are accepted: the table is data, never code
to run.

The values come from a config.json, which anyone can write, so every operation is held to what
the table means by it: arithmetic on numbers, a list literal repeated a layer count of times
(``['full_attention'] * num_hidden_layers``, bounded like ``range``), ``int`` of a finite number.
A string multiplied or formatted (``'%0999999999d' % n``), or a list grown past the bound, is a
``TypeError`` or ``ValueError`` the caller turns into a ConfigError, before any memory is taken.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

Compiled = Callable[[Mapping[str, Any], tuple[int, ...]], Any]

_ALLOWED: tuple[type[ast.AST], ...] = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Constant,
    ast.Call,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Div,
    ast.Mod,
    ast.USub,
    ast.Not,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Gt,
    ast.GtE,
    ast.Lt,
    ast.LtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.ListComp,
    ast.comprehension,
    ast.Store,
    ast.List,
    ast.Tuple,
)
_INDEX_NAMES = ("i", "j")
# int() truncates as the modelling code does (``int(2 * intermediate_size / 3)``).
# range() is bounded: a config's layer count drives it, and a hostile one must not hang the
# estimate (no real model has more layers than this).
MAX_RANGE = 4096


def _range(*args: int) -> range:
    out = range(*args)
    if len(out) > MAX_RANGE:
        raise ValueError(f"range of {len(out):,} exceeds {MAX_RANGE:,}")
    return out


def _int(value: object) -> int:
    if not isinstance(value, int | float):
        raise TypeError(f"int() of {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"int() of {value}")
    return int(value)


_CALLS = {"len": len, "range": _range, "int": _int}
_SEQUENCES = (str, bytes, list, tuple, dict)


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) or isinstance(b, _SEQUENCES):
        seq, times = (a, b) if isinstance(a, _SEQUENCES) else (b, a)
        if not isinstance(seq, list) or not isinstance(times, int):
            raise TypeError(f"{type(a).__name__} * {type(b).__name__}")
        if len(seq) * times > MAX_RANGE:
            raise ValueError(f"a list of {len(seq) * times:,} entries exceeds {MAX_RANGE:,}")
    return a * b


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) or isinstance(b, _SEQUENCES):
        raise TypeError(f"{type(a).__name__} + {type(b).__name__}")
    return a + b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQUENCES) or isinstance(b, _SEQUENCES):
        raise TypeError(f"{type(a).__name__} % {type(b).__name__}")  # never string formatting
    return a % b


# The operators a config's values could turn into an allocation, as checked calls.
_GUARDED_OPS: dict[type[ast.operator], str] = {ast.Mult: "_mul", ast.Add: "_add", ast.Mod: "_mod"}
_GUARDS = {"_mul": _mul, "_add": _add, "_mod": _mod}


class MemberList(list[Any]):
    """A config's list whose ``in`` takes constant time: the table tests ``i in mlp_only_layers``
    once per block, which over a plain list is quadratic in a hostile config's lengths.

    Built once the config is resolved; never changed afterwards (the set is made on first use).
    """

    __slots__ = ("_members",)
    _members: frozenset[Any] | None

    def __contains__(self, item: object) -> bool:
        try:
            members = self._members
        except AttributeError:
            try:
                members = frozenset(self)
            except TypeError:  # an unhashable entry (a nested list): the plain scan
                members = None
            self._members = members
        if members is None:
            return list.__contains__(self, item)
        try:
            return item in members
        except TypeError:
            return False


class ExpressionError(ValueError):
    """An expression of the table is not of the accepted form (a defect of the table)."""


class _ToLookups(ast.NodeTransformer):
    """``a.b[i] + c`` -> ``f["a.b"][x[0]] + f["c"]``: attributes read from the flat config."""

    def __init__(self) -> None:
        self.bound: set[str] = set()

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        # The comprehension's own variable (``i`` in ``[... for i in range(n)]``) stays a name.
        for gen in node.generators:
            if isinstance(gen.target, ast.Name):
                self.bound.add(gen.target.id)
        self.generic_visit(node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        guard = _GUARDED_OPS.get(type(node.op))
        if guard is None:
            return node
        return ast.Call(ast.Name(guard, ast.Load()), [node.left, node.right], [])

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.bound or node.id in _CALLS:
            return node
        if node.id in _INDEX_NAMES:
            return ast.Subscript(
                ast.Name("x", ast.Load()), ast.Constant(_INDEX_NAMES.index(node.id)), ast.Load()
            )
        return ast.Subscript(ast.Name("f", ast.Load()), ast.Constant(node.id), ast.Load())

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        parts = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name):
            raise ExpressionError("attributes must be dotted names")
        key = ".".join([base.id, *reversed(parts)])
        return ast.Subscript(ast.Name("f", ast.Load()), ast.Constant(key), ast.Load())


def _check(tree: ast.AST, text: str) -> None:
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{type(node).__name__} is not allowed in {text!r}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords
        ):
            raise ExpressionError(f"only len(), range() and int() may be called in {text!r}")
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
        if name.startswith("_"):
            raise ExpressionError(f"private name {name!r} in {text!r}")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | str | bool | None):
            raise ExpressionError(f"constant {node.value!r} is not allowed in {text!r}")


@lru_cache(maxsize=4096)
def compile_expression(text: str) -> Compiled:
    """A function ``(flat config, block indices) -> value`` for one table expression.

    Raises:
        ExpressionError: the text uses anything beyond the accepted forms.
    """
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{text!r} is not an expression: {exc.msg}") from None
    _check(tree, text)
    body = _ToLookups().visit(tree).body
    lam = ast.Expression(
        ast.Lambda(
            ast.arguments(
                posonlyargs=[],
                args=[ast.arg("f"), ast.arg("x")],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            ),
            body,
        )
    )
    ast.fix_missing_locations(lam)
    # Safe: every node was checked above; names resolve only to the two arguments, _CALLS and
    # the operators' guards.
    fn: Callable[[Mapping[str, Any], tuple[int, ...]], Any] = eval(
        compile(lam, "<architecture table>", "eval"), {"__builtins__": {}, **_CALLS, **_GUARDS}
    )
    return fn


def names_in(text: str) -> set[str]:
    """The config attributes an expression reads (dotted for sub-configs)."""
    tree = ast.parse(text, mode="eval")
    bound = {
        g.target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.ListComp)
        for g in n.generators
        if isinstance(g.target, ast.Name)
    }
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            parts = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                out.add(".".join([base.id, *reversed(parts)]))
    dotted_roots = {n.split(".")[0] for n in out}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and node.id not in bound
            and node.id not in _INDEX_NAMES
            and node.id not in _CALLS
            and node.id not in dotted_roots
        ):
            out.add(node.id)
    return out
