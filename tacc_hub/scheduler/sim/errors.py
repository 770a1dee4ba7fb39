"""The simulator's errors (a module of their own: ``simulator`` may be compiled, see ``scheduler.native``,
and mypyc cannot compile subclasses of built-in exceptions as native classes)."""


class PolicyError(RuntimeError):
    """A policy broke the contract (see ``policy`` and ``simulator``'s docstring)."""


class Stuck(RuntimeError):
    """Jobs wait, nothing runs, and no event is left that could change that."""
