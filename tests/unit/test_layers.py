"""The layers of docs/architecture.md only point down: no module imports, at module level, a
module of a layer above its own. Every module belongs to a layer (a new one must be placed)."""

from __future__ import annotations

from .test_import_cycles import imports, modules

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "bottom",
        (
            "tickwork.types",
            "tickwork.errors",
            "tickwork.config",
            "tickwork.limits",
            "tickwork.jsonschema",
            "tickwork.logs",
            "tickwork.masking",
            "tickwork.portal",
        ),
    ),
    ("storage", ("tickwork.db",)),
    (
        "domain",
        (
            "tickwork.queue",
            "tickwork.schedule",
            "tickwork.signals",
            "tickwork.auth",
            "tickwork.ops",
            "tickwork.definitions",
            "tickwork.task",
        ),
    ),
    (
        "services",
        (
            "tickwork.services",
            "tickwork.worker",
            "tickwork.runtimes",
            "tickwork.queue.retention",
            "tickwork.queue.watchdog",
            "tickwork.ops.rollups",
            "tickwork.schedule.scheduler",
            "tickwork.signals.base",
            "tickwork.signals.processor",
            "tickwork.signals.sweeps",
            "tickwork.signals.runtime",
        ),
    ),
    (
        "entry points",
        (
            "tickwork.app",
            "tickwork.api",
            "tickwork.cli",
            "tickwork.serve",
            "tickwork.http_bounds",  # serve's HTTP server protocol
            "tickwork.web",
            "tickwork.mcp",
            "tickwork.testing",
            "tickwork.contrib",
            "tickwork.reference",
            "tickwork.__main__",
        ),
    ),
]
"""Each layer with the modules (or packages) in it; the longest matching name decides, so a
service module may live in its domain's package."""
TOP = {"tickwork": len(LAYERS) - 1}
"""The package itself re-exports the public API: it stands with the entry points."""


def layer_of(module: str) -> int | None:
    if module in TOP:
        return TOP[module]
    best: tuple[int, int] | None = None
    for number, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                best is None or len(name) > best[1]
            ):
                best = (number, len(name))
    return None if best is None else best[0]


def test_every_module_has_a_layer() -> None:
    assert [m for m in modules() if layer_of(m) is None] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    known = modules()
    upward = []
    for module, path in sorted(known.items()):
        own = layer_of(module)
        for imported in sorted(imports(path, known)):
            theirs = layer_of(imported)
            if own is not None and theirs is not None and theirs > own:
                upward.append(
                    f"{module} ({LAYERS[own][0]}) imports {imported} ({LAYERS[theirs][0]})"
                )
    assert upward == []
