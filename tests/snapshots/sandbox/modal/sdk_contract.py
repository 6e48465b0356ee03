"""Checks a call against the installed ``modal`` SDK, so the fake cannot drift from it.

``check_call("Sandbox.create", args, kwargs)`` binds the arguments to the real signature (a
``TypeError`` if the SDK would reject them) and checks the values against the simple parts of
its annotations (``int | None``, ``bool``, ``Literal[-1, 1]``, ``Sequence[str]``, ...). SDK
classes in annotations are not checked: the fake passes its own stand-ins for them.

synchronicity wraps every public SDK callable; ``inspect.signature`` on the wrapper reports the
wrapped coroutine's parameters, with a leading ``self``/``cls`` for methods and classmethods that
the caller does not pass (``test_sdk_contract`` checks that against the unwrapped classes).
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from typing import Any, Literal

import modal
import modal.experimental
from modal.container_process import ContainerProcess
from modal.io_streams import StreamReader, StreamWriter
from modal.sandbox.sandbox import SandboxFilesystem

REAL: dict[str, Any] = {
    "App": modal.App,
    "Client": modal.Client,
    "ContainerProcess": ContainerProcess,
    "Image": modal.Image,
    "Sandbox": modal.Sandbox,
    "SandboxFilesystem": SandboxFilesystem,
    "StreamReader": StreamReader,
    "StreamWriter": StreamWriter,
    "experimental": modal.experimental,
}

_RECEIVER = object()  # stands in for the self/cls the wrapper reports but callers do not pass


class ContractViolation(AssertionError):
    """The code under test used the SDK in a way the installed version would not accept."""


def real(target: str) -> Any:
    """The installed SDK's object named ``Owner.attr`` (e.g. ``"Sandbox.exec"``)."""
    owner, _, name = target.partition(".")
    if owner not in REAL:
        raise ContractViolation(f"{target}: unknown SDK owner {owner!r}")
    try:
        return getattr(REAL[owner], name)
    except AttributeError:
        raise ContractViolation(
            f"{target}: modal {modal.__version__} has no such attribute"
        ) from None


def signature(target: str) -> inspect.Signature:
    return inspect.signature(real(target))


def check_attribute(target: str) -> None:
    """The SDK has the attribute or property ``target`` (e.g. ``"Sandbox.object_id"``)."""
    real(target)


def check_call(target: str, args: tuple = (), kwargs: dict | None = None) -> inspect.BoundArguments:
    """Bind ``args``/``kwargs`` to the real SDK callable ``target``; raise ContractViolation."""
    kwargs = kwargs or {}
    sig = signature(target)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        args = (_RECEIVER, *args)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise ContractViolation(
            f"{target}{sig} rejects args={args[1:] if args and args[0] is _RECEIVER else args} "
            f"kwargs={kwargs}: {exc}"
        ) from None
    for name, value in bound.arguments.items():
        param = sig.parameters[name]
        if value is _RECEIVER:
            continue
        values = (
            value
            if param.kind is param.VAR_POSITIONAL
            else value.values()
            if param.kind is param.VAR_KEYWORD
            else (value,)
        )
        for item in values:
            if not conforms(item, param.annotation):
                raise ContractViolation(
                    f"{target}: {name}={item!r} does not match the SDK's annotation "
                    f"{param.annotation}"
                )
    bound.apply_defaults()  # after the checks: callers read arguments as the SDK would see them
    return bound


def conforms(value: Any, annotation: Any) -> bool:
    """True unless ``value`` clearly violates ``annotation`` (unknown parts are accepted)."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    type_args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in type_args)
    if origin is Literal:
        return value in type_args
    if origin is not None:
        return _conforms_generic(value, origin, type_args)
    if isinstance(annotation, type):
        if annotation is float:
            return isinstance(value, int | float) and not isinstance(value, bool)
        if annotation.__module__ in ("builtins", "collections.abc"):
            return isinstance(value, annotation)
    return True  # SDK classes, protobuf messages, TypeVars: not ours to check


def _conforms_generic(value: Any, origin: Any, type_args: tuple) -> bool:
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            return False
        if len(type_args) == 2:
            key_t, value_t = type_args
            return all(conforms(k, key_t) and conforms(v, value_t) for k, v in value.items())
        return True
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(type_args) == 2 and type_args[1] is Ellipsis:
            return all(conforms(v, type_args[0]) for v in value)
        return len(value) == len(type_args) and all(
            conforms(v, t) for v, t in zip(value, type_args, strict=True)
        )
    if origin in (list, collections.abc.Sequence, collections.abc.Collection):
        if isinstance(value, str | bytes) or not isinstance(value, origin):
            return False
        return not type_args or all(conforms(v, type_args[0]) for v in value)
    return True
