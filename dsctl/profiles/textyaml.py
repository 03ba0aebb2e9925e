"""Read YAML given as text, strictly: duplicate keys are an error, every failure is one InputError.

PyYAML's ``safe_load`` keeps the last of two equal keys, so a hand-edited profile or record could silently
lose the value its author meant; here a duplicate key names both lines.
"""

from __future__ import annotations

from typing import Any

import yaml

from dsctl.errors import InputError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key (a list): construct_mapping reports it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {first + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(text: str, source: str, error: type[InputError] = InputError) -> Any:
    """Parse ``text`` (a BOM is allowed); raise ``error`` naming ``source``, line and column on any failure."""
    try:
        return yaml.load(text.removeprefix("\ufeff"), Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        if isinstance(exc, yaml.constructor.ConstructorError):
            raise error(f"{source}: {where}{exc.problem or exc.context}: YAML keys must be unique") from None
        raise error(f"{source}: {where}YAML syntax error: {exc.problem or exc.context} (this is not valid YAML)",
                    hint="check indentation and that every 'key: value' pair has a space after the colon") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: YAML error: {str(exc)[:200]}") from None
    except RecursionError:
        raise error(f"{source}: YAML nested too deeply (thousands of levels)") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise error(f"{source}: unreadable YAML value: {str(exc).split(';')[0][:200]}") from None
