"""Read YAML given as text, strictly and within bounds: duplicate keys are an error, every failure is one InputError.

PyYAML's ``safe_load`` keeps the last of two equal keys, so a hand-edited profile or record could silently
lose the value its author meant; here a duplicate key names both lines.

Bounds (docs/reliability.md), checked before the costly steps: at most ``MAX_YAML_CHARS`` characters; a count of
the characters that can start or separate a node (line breaks, ``,:-[{?``), an upper bound of the nodes the
file can hold, at most ``MAX_YAML_SEPARATORS`` before composing; after composing (libyaml's C parser when
present) at most ``MAX_YAML_NODES`` nodes with every alias expanded (a "billion laughs" file is refused before
any Python object is built) and at most ``MAX_YAML_ALIASES`` aliases. Profiles, records and job lists are a few
kB; these limits are far above them.
"""

from __future__ import annotations

from typing import Any

import yaml

from dsctl.errors import InputError

#: longest YAML text (characters); a health record is ~10 kB, a profile ~2 kB
MAX_YAML_CHARS = 4 * 1024**2
#: nodes after alias expansion
MAX_YAML_NODES = 100_000
#: characters that may start or separate a node, counted on the text before parsing
MAX_YAML_SEPARATORS = 2 * MAX_YAML_NODES
#: alias uses (``*name``)
MAX_YAML_ALIASES = 1_000
_SEPARATORS = "\n,:-[{?"

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser and composer, Python constructors


class _StrictLoader(_Base):
    """SafeLoader (libyaml's when installed) that refuses a mapping with the same key twice."""


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


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(nodes with every alias expanded, alias uses) of a composed document; each distinct node is visited
    once (sizes are memoised), so a billion-laughs file costs its own size, not its expansion."""
    size: dict[int, int] = {}
    aliases = 0
    seen_children: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in size:
            continue
        if isinstance(node, yaml.ScalarNode):
            size[key] = 1
            continue
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            size[key] = min(1 + sum(size.get(id(c), 1) for c in children), 1 << 62)
            continue
        stack.append((node, True))
        for child in children:
            if id(child) in seen_children:
                aliases += 1  # a node met again is an alias use
            seen_children.add(id(child))
            if id(child) not in size:
                stack.append((child, False))
    return size[id(root)], aliases


def _bounded_load(text: str, source: str, error: type[InputError]) -> Any:
    if len(text) > MAX_YAML_CHARS:
        raise error(f"{source}: {len(text):,} characters of YAML; at most {MAX_YAML_CHARS:,} are read",
                    hint="profiles, records and job lists are a few kB: is this the right file?")
    rough = sum(text.count(c) for c in _SEPARATORS)
    if rough > MAX_YAML_SEPARATORS:
        raise error(f"{source}: YAML with up to {rough:,} nodes (line breaks and separators); at most "
                    f"{MAX_YAML_NODES:,} are read", hint="profiles, records and job lists are a few kB")
    loader = _StrictLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        nodes, aliases = _expanded_size(root)
        if nodes > MAX_YAML_NODES or aliases > MAX_YAML_ALIASES:
            raise error(f"{source}: YAML of {nodes:,} nodes with {aliases:,} aliases expanded; at most "
                        f"{MAX_YAML_NODES:,} nodes and {MAX_YAML_ALIASES:,} aliases are read")
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_yaml(text: str, source: str, error: type[InputError] = InputError) -> Any:
    """Parse ``text`` (a BOM is allowed) within the bounds above; raise ``error`` naming ``source``, line and
    column on any failure."""
    try:
        return _bounded_load(text.removeprefix("\ufeff"), source, error)
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
