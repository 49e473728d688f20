"""The grader's recorder: runs inside the grading kernel, before any submitted code.

The grader's trusted preamble cell calls :func:`make_recorder`, which captures
the check of every exercise from the dlbook registry, a snapshot of the
module globals, classes and functions the checks depend on, and an open
results file. Later, a trusted record cell after each submitted exercise cell
calls the recorder: it restores the snapshot (undoing any monkeypatching of
dlbook.exercises, builtins, math, numpy, torch, scipy... done by the submission),
looks up the student's function by name in the kernel's globals, runs the
captured check and appends one JSON line to the results file.

Threat model, written down so nobody over-trusts it: the submission runs in
the same Python process as the checks. This stops the cheats a student would
plausibly try (redefining ``check``, editing the check cells, printing fake
"passed" lines, replacing or monkeypatching the registry, the check functions
or the helpers they call). A determined attack on the interpreter itself
(walking the garbage collector to find this recorder, patching methods of
tensor types) is out of scope; the grader flags exercise cells that touch
such internals so that the instructor reads them.
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
import types

#: Modules whose changed attributes are put back before each check.
GUARDED_MODULES = ("builtins", "math", "fractions", "itertools", "functools", "operator",
                   "json", "numbers", "numpy", "numpy.linalg", "torch", "scipy.optimize")


class _Snapshot:
    """Module globals, class attributes and function code, to put back later."""

    def __init__(self):
        self.full = []       # (module dict, copy): dlbook.exercises.*, restored exactly
        self.changed = []    # (module dict, copy): other modules, changed keys put back
        self.classes = []    # (class, copy of its __dict__)
        self.functions = []  # (function, code, defaults, kwdefaults)
        for name, module in list(sys.modules.items()):
            if module is None:
                continue
            if name == "dlbook.exercises" or name.startswith("dlbook.exercises."):
                self.full.append((vars(module), dict(vars(module))))
                self._functions_and_classes(module)
            elif name in GUARDED_MODULES or name == "dlbook" or name.startswith("dlbook."):
                self.changed.append((vars(module), dict(vars(module))))
                if name.startswith("dlbook"):
                    self._functions_and_classes(module)

    def _functions_and_classes(self, module):
        for value in list(vars(module).values()):
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                self._function(value)
            elif isinstance(value, type) and value.__module__ == module.__name__:
                self.classes.append((value, dict(vars(value))))
                for attr in vars(value).values():
                    for fn in (attr, getattr(attr, "__func__", None),
                               getattr(attr, "fget", None), getattr(attr, "fset", None)):
                        if isinstance(fn, types.FunctionType):
                            self._function(fn)

    def _function(self, fn):
        self.functions.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))

    def restore(self):
        for namespace, saved in self.full:
            namespace.clear()
            namespace.update(saved)
        for namespace, saved in self.changed:
            for key, value in saved.items():
                if namespace.get(key, _MISSING) is not value:
                    namespace[key] = value
        for cls, saved in self.classes:
            current = vars(cls)
            for key in [k for k in current if k not in saved]:
                try:
                    delattr(cls, key)
                except (AttributeError, TypeError):
                    pass
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    try:
                        setattr(cls, key, value)
                    except (AttributeError, TypeError):
                        pass
        for fn, code, defaults, kwdefaults in self.functions:
            if fn.__code__ is not code:
                fn.__code__ = code
            if fn.__defaults__ is not defaults:
                fn.__defaults__ = defaults
            if fn.__kwdefaults__ is not kwdefaults:
                fn.__kwdefaults__ = kwdefaults


_MISSING = object()


def make_recorder(results_path: str, user_globals: dict, exercise_ids):
    """Capture the checks now; return ``record(exercise_id)`` for the record cells."""
    import json

    importlib.import_module("dlbook.exercises").load_all()  # the registry and every chapter's checks
    importlib.import_module("scipy.optimize")     # imported lazily by checks: guard it now
    core = sys.modules["dlbook.exercises.core"]
    captured = {eid: dataclasses.replace(core.get_exercise(eid)) for eid in exercise_ids}
    run_exercise = core.run_exercise
    snapshot = _Snapshot()
    restore = snapshot.restore
    dumps = json.dumps
    handle = open(results_path, "a", encoding="utf-8", buffering=1)
    write, flush = handle.write, handle.flush
    get = dict.get

    def record(exercise_id):
        restore()
        ex = captured[exercise_id]
        answer = get(user_globals, ex.function_name, _MISSING)
        if answer is _MISSING:
            passed, reason, cases = False, f"function {ex.function_name} not defined", "0/0"
        else:
            result = run_exercise(ex, answer)
            passed, reason = bool(result.passed), str(result.message)
            cases = f"{int(result.cases_passed)}/{int(result.cases_total)}"
        line = dumps({"exercise": exercise_id, "passed": passed,
                      "points": ex.points if passed else 0, "reason": reason, "cases": cases})
        write(line + "\n")
        flush()
        print(("✅ " if passed else "❌ ") + f"{exercise_id}: {reason}")

    return record
