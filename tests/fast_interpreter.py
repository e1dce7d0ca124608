"""Triton's interpreter, made to skip work it repeats, for the CPU suite's speed.

The interpreter runs a launch by patching ``triton.language`` (its builtins made to compute on
NumPy arrays), running every program of the grid in Python, then undoing those patches. It
also patches the language again at every call of a ``@triton.jit`` helper, inside every
program: ``inspect.getmembers`` over ``triton.language``, its ``tensor`` and ``math``, which the
launch already patched and which stay patched until it ends. A helper's patches are never
undone (the interpreter drops what would undo them), and patching a patched module again sets
equivalent functions. The round ops' kernels call helpers a few hundred times per launch, so
about half of an interpreted launch went to that (cProfile on the 2-core CPU machine, triton
3.9: 0.18-0.22 s per ``prepare_eagle_round`` call, 0.09-0.11 s with the skip; the suite's
figures are in ``benchmarks/results/cpu_suite_durations.txt``).

``skip_repeated_language_patches`` makes a helper's call skip the patching when the modules
it would patch (the ``triton.language`` or ``triton.language.core`` its globals name) were
already patched during the same launch; the first helper naming a module not yet patched (the
standard library's name ``triton.language.core``) still patches it. Nothing else changes: the
kernels run the same interpreted operations, and a launch undoes what it undid before. Like
the interpreter itself, it assumes one interpreted launch at a time (the thread tests take
turns, ``backends.interpreted_launches_take_turns``). Triton 3.6-3.9 share the structure
relied on; where it is missing nothing is installed and ``tests/test_fast_interpreter.py``
fails, so that the loss is seen.
"""

import inspect


class _NothingToRestore:
    def restore(self):
        pass


def skip_repeated_language_patches():
    """Install the skip; return whether it was installed now (False where this Triton's
    interpreter lacks ``_patch_lang`` or ``GridExecutor``, or the skip is already there)."""
    from triton.runtime import interpreter

    patch_lang = getattr(interpreter, "_patch_lang", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if patch_lang is None or executor is None or getattr(patch_lang, "skips_repeats", False):
        return False
    languages = (interpreter.tl, interpreter.tl.core)
    run_grid = executor.__call__
    patched = None      # the language modules the running launch has patched; None between

    def patch_once(fn):
        nonlocal patched
        modules = {value for value in fn.__globals__.values()
                   if inspect.ismodule(value) and value in languages}
        if modules and patched is not None and modules <= patched:
            return _NothingToRestore()
        scope = patch_lang(fn)
        if patched is not None:
            patched |= modules
        return scope

    def run_grid_patching_once(self, *args, **kwargs):
        nonlocal patched
        patched = set()
        try:
            return run_grid(self, *args, **kwargs)
        finally:
            patched = None

    patch_once.skips_repeats = True
    patch_once.original = patch_lang
    run_grid_patching_once.original = run_grid
    interpreter._patch_lang = patch_once
    executor.__call__ = run_grid_patching_once
    return True
