"""The one registry idiom of every plug-in kind: forecasters, inference families, peers, exporters and sources.

A plug-in kind keeps one :class:`Registry` (a ``dict`` from name to the plug-in), and a plug-in is one module that
defines its class or function and registers it there, by a decorator or a call, in the spirit of krr's strategies
(``robusta_krr/core/abstract/strategies.py``) and formatters. An unknown name is a :class:`UnknownPlugin` error naming
the kind and the known names; a name means one thing, so registering another object under a taken name is refused.

It lives in ``forecasting`` because that package imports nothing of ours: ``optimizer`` and ``capplan`` may import it.
"""

from __future__ import annotations

from typing import Callable, TypeVar, overload

T = TypeVar("T")


class UnknownPlugin(KeyError):
    """A name no plug-in of the kind is registered under. ``str()`` names the kind, the name and the known names."""

    def __init__(self, kind: str, name: str, known: list[str]):
        super().__init__(name)
        self.kind, self.name, self.known = kind, name, known

    def __str__(self) -> str:
        return f"unknown {self.kind} {self.name!r}; known: {', '.join(self.known) or 'none'}"


class Registry(dict[str, T]):
    """The plug-ins of one kind, by name, in registration order (a ``dict``: ``registry[name]``, ``in``, ``items()``).

    ``kind`` names the kind in errors (``"inference family"``). Looking up an unknown name raises
    :class:`UnknownPlugin` (a ``KeyError``)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def __missing__(self, name: str) -> T:
        raise UnknownPlugin(self.kind, name, list(self))

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, plugin: T) -> T: ...

    def register(self, name: str, plugin=None):
        """Register ``plugin`` under ``name`` (``registry.register(name, obj)``), or use as a decorator
        (``@registry.register(name)``). Returns the plugin, so a decorated definition is unchanged.

        Raises ValueError when ``name`` is empty or already holds another plug-in of this kind."""
        def add(obj: T) -> T:
            if not name:
                raise ValueError(f"a {self.kind} needs a name")
            if name in self and self[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered ({self[name]!r})")
            self[name] = obj
            return obj

        return add if plugin is None else add(plugin)

    def copy(self) -> "Registry[T]":
        """A shallow copy that is still a registry of the same kind (``dict.copy`` would give a plain dict)."""
        out: Registry[T] = Registry(self.kind)
        out.update(self)
        return out

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a toy plug-in take it out again); absent names are ignored."""
        self.pop(name, None)
