"""Build the effective configuration from its layers, remembering where each value came from.

Layers, lowest first: built-in defaults < TOML file < ``IMAGEGEN_BRIDGE__*`` environment
< ``--unset`` < ``--set``. They are merged as plain trees and validated once at the end,
so a value is judged in its final context. Within the command-line layer, unsets are
applied before sets (``--unset runtime.providers.mock --set
runtime.providers.mock.max_queued=0`` first clears the entry, then sets one field).

Provenance is kept per leaf as ``{field, source, key}``: the key is the file's field
path, the variable name or the override key as typed, never a value.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from imagebridge.config._tree import format_path, iter_leaves
from imagebridge.config.files import (
    MAX_CONFIG_FILE_BYTES,
    discover_config_file,
    read_config_file,
)
from imagebridge.config.model import BridgeConfig, builtin_defaults
from imagebridge.config.overrides import (
    Assignment,
    environment_assignments,
    parse_set,
    parse_unset,
)
from imagebridge.config.paths import default_data_dir
from imagebridge.config.validation import ConfigIssue, check, raise_for_issues
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "ConfigOrigin",
    "ConfigSource",
    "LoadedConfig",
    "load_config",
    "parse_config",
]

ConfigSource = Literal["default", "file", "environment", "override"]
SCHEMA_MESSAGE = "effective configuration does not match the schema"

_REASONS = {
    "extra_forbidden": "unknown_key",
    "missing": "missing",
    "greater_than_equal": "out_of_range",
    "less_than_equal": "out_of_range",
    "greater_than": "out_of_range",
    "less_than": "out_of_range",
    "capacity": "invalid_value",
    "parallelism": "invalid_value",
    "path_empty": "invalid_value",
    "path_nul": "invalid_value",
    "path_too_long": "invalid_value",
}
_REASON_TEXT = {
    "unknown_key": "is not a known configuration key",
    "missing": "is required",
    "out_of_range": "is outside the range its type allows",
    "wrong_type": "has the wrong type",
    "invalid_value": "does not hold an accepted value",
    "cannot_unset": "is required and cannot be unset",
}


@dataclass(frozen=True, slots=True)
class ConfigOrigin:
    """Where one effective leaf came from: a layer and the key it was given under."""

    field: str
    source: ConfigSource
    key: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "source": self.source, "key": self.key}


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The effective configuration, the file it came from, provenance and check results."""

    config: BridgeConfig
    path: Path | None
    origins: list[ConfigOrigin]
    issues: list[ConfigIssue] = field(default_factory=list)

    def origin(self, field: str) -> ConfigOrigin | None:
        """The origin of one dotted leaf, if it is a leaf."""
        for origin in self.origins:
            if origin.field == field:
                return origin
        return None

    def require_valid(self, *, listener: bool = True) -> BridgeConfig:
        """The configuration, or ``configuration`` "configuration validation failed".

        Uses the issues found at load time; ``listener=False`` lets a command that never
        listens run despite listener-only issues (a public bind without a bearer token).
        """
        raise_for_issues(self.issues, listener=listener)
        return self.config


def load_config(
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    sets: Sequence[str] = (),
    unsets: Sequence[str] = (),
    cwd: Path | None = None,
    max_file_bytes: int = MAX_CONFIG_FILE_BYTES,
) -> LoadedConfig:
    """Discover, read, merge and validate the configuration.

    ``env`` defaults to the process environment and is the only environment read (for
    ``IMAGEGEN_BRIDGE__*``, ``IMAGEGEN_BRIDGE_CONFIG``, ``IMAGEGEN_BRIDGE_DATA_DIR`` and
    ``XDG_CONFIG_HOME``). Schema problems raise ``configuration`` with
    ``details.field``; semantic problems are returned in ``.issues``. Nothing here
    creates files or directories.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    base = cwd if cwd is not None else Path.cwd()
    path = discover_config_file(config_path, environ, base)
    file_tree = read_config_file(path, max_file_bytes) if path is not None else None
    return parse_config(
        file_tree,
        path=path,
        env=environ,
        sets=sets,
        unsets=unsets,
        data_dir=default_data_dir(environ, base),
    )


def parse_config(
    file_tree: Mapping[str, Any] | None,
    *,
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    sets: Sequence[str] = (),
    unsets: Sequence[str] = (),
    data_dir: Path | None = None,
) -> LoadedConfig:
    """Merge already-parsed layers; ``load_config`` without the file system (for embedding)."""
    environ: Mapping[str, str] = {} if env is None else env
    merger = _Merger(builtin_defaults(data_dir if data_dir is not None else default_data_dir()))
    if file_tree is not None:
        merger.merge_file(dict(file_tree))
    for assignment in environment_assignments(environ):
        merger.assign(assignment, "environment")
    for assignment in parse_unset(unsets):
        merger.unset(assignment)
    for assignment in parse_set(sets):
        merger.assign(assignment, "override")
    config = _validate(merger.tree)
    return LoadedConfig(
        config=config,
        path=path,
        origins=merger.origins(config),
        issues=check(config),
    )


def _schema_error(path: Sequence[str | int], reason: str) -> BridgeError:
    dotted = format_path(path) or "$"
    return BridgeError(
        ErrorCode.CONFIGURATION,
        SCHEMA_MESSAGE,
        details={"field": dotted, "reason": reason},
    ).with_suggestion(f"`{dotted}` {_REASON_TEXT[reason]}; fix or remove it.")


def _validate(tree: dict[str, Any]) -> BridgeConfig:
    try:
        return BridgeConfig.model_validate(tree)
    except ValidationError as exc:
        # Only the location and the kind of the first problem leave this function: the
        # pydantic error itself carries the rejected input and is dropped (``from None``).
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        reason = _REASONS.get(first["type"], "wrong_type")
        location = [part for part in first["loc"] if isinstance(part, str | int)]
        error = _schema_error(location, reason)
    raise error from None


class _Merger:
    """The merged tree plus the origin of each leaf path."""

    def __init__(self, defaults: BridgeConfig) -> None:
        self.tree: dict[str, Any] = defaults.model_dump(mode="json")
        self._origins: dict[tuple[str, ...], tuple[ConfigSource, str]] = {}
        self._record(self.tree, (), "default", None)

    # -- provenance ----------------------------------------------------------------------

    def _record(
        self, value: Any, prefix: tuple[str, ...], source: ConfigSource, key: str | None
    ) -> None:
        for path, _ in iter_leaves(value, prefix):
            self._origins[path] = (source, key if key is not None else format_path(path))

    def _forget(self, prefix: tuple[str, ...]) -> None:
        size = len(prefix)
        for path in [path for path in self._origins if path[:size] == prefix]:
            del self._origins[path]

    def origins(self, config: BridgeConfig) -> list[ConfigOrigin]:
        """One origin per leaf of the validated document, sorted by field."""
        result = []
        for path, _ in iter_leaves(config.model_dump(mode="json")):
            source, key = self._origins.get(path, ("default", format_path(path)))
            result.append(ConfigOrigin(format_path(path), source, key))
        return sorted(result, key=lambda origin: origin.field)

    # -- layers ----------------------------------------------------------------------------

    def merge_file(self, document: dict[str, Any]) -> None:
        self._merge(self.tree, document, (), "file", None)

    def _merge(
        self,
        target: dict[str, Any],
        layer: dict[str, Any],
        prefix: tuple[str, ...],
        source: ConfigSource,
        key: str | None,
    ) -> None:
        for name, value in layer.items():
            path = (*prefix, name)
            existing = target.get(name)
            if isinstance(existing, dict) and isinstance(value, dict):
                self._merge(existing, value, path, source, key)
            else:
                self._forget(path)
                target[name] = value
                self._record(value, path, source, key)

    def _parent(self, path: tuple[str, ...]) -> dict[str, Any]:
        """The table holding ``path[-1]``, creating missing tables on the way."""
        node = self.tree
        for depth, name in enumerate(path[:-1]):
            if name not in node:
                node[name] = {}
            child = node[name]
            if not isinstance(child, dict):
                raise _schema_error(path[: depth + 1], "wrong_type")
            node = child
        return node

    def assign(self, assignment: Assignment, source: ConfigSource) -> None:
        path = assignment.path
        parent = self._parent(path)
        self._merge(parent, {path[-1]: assignment.value}, path[:-1], source, assignment.source_key)

    def unset(self, assignment: Assignment) -> None:
        path = assignment.path
        kind = _field_kind(path)
        if kind == "required":
            raise _schema_error(path, "cannot_unset")
        parent = self._parent(path)
        self._forget(path)
        if kind == "map_entry":
            parent.pop(path[-1], None)
        elif kind == "map":
            parent[path[-1]] = {}
        else:
            parent[path[-1]] = None
            self._record(None, path, "override", assignment.source_key)


def _field_kind(path: tuple[str, ...]) -> str:
    """What an unset would clear: ``optional``, ``map``, ``map_entry`` or ``required``.

    Raises the schema error for a path the model does not have.
    """
    node: Any = BridgeConfig
    for depth, name in enumerate(path):
        last = depth == len(path) - 1
        if _is_model(node):
            fields = {info.alias or attr: info for attr, info in node.model_fields.items()}
            if name not in fields:
                raise _schema_error(path[: depth + 1], "unknown_key")
            annotation = fields[name].annotation
            if last:
                if typing.get_origin(annotation) is dict:
                    return "map"
                return "optional" if _allows_none(annotation) else "required"
            node = annotation
        elif typing.get_origin(node) is dict:
            if last:
                return "map_entry"
            node = typing.get_args(node)[1]
        else:
            raise _schema_error(path[:depth], "wrong_type")
    return "required"


def _is_model(node: Any) -> bool:
    return isinstance(node, type) and issubclass(node, BaseModel)


def _allows_none(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return type(None) in typing.get_args(annotation)
    return False
