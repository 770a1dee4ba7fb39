"""Many tasks at once (issue 20): arrays and sweeps, dependencies between tasks, inputs from earlier tasks.

These are the fields a TaskSpec may carry; turning an ``array`` into its elements is ``arrays.expand``.

Invariants:
- Pure data, frozen, unknown keys refused, no I/O (as the rest of the schema).
- A parameter's name is an identifier (``TACC_PARAM_<NAME>`` upper-cased is a variable name); its
  value is a scalar that reaches the program only as one argv item or one environment value, never
  through a shell.
- An element (``ArrayElement``) is in its task's digest: two elements never share a digest.
  ``depends_on`` is not (``digest``): it says when a task runs, not what it runs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .fields import Name, RelPath, SafeText

MAX_ARRAY = 10_000
"""Most elements one array may have (Slurm's default MaxArraySize is 1001; a sweep of 10,000 is one request)."""

PARAM_RE = r"[A-Za-z_][A-Za-z0-9_]{0,63}"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


ParamName = Annotated[str, Field(pattern=f"^{PARAM_RE}$")]
ParamValue = Annotated[SafeText, Field(max_length=4096)] | int | Annotated[float, Field(allow_inf_nan=False)] | bool


class ArraySpec(_Model):
    """The elements of an array: exactly one of ``range``, ``values`` or ``grid``; at most ``max_running`` at once.

    - ``range``: Slurm's ``--array`` syntax without ``%``: ``0-15``, ``0-15:2``, ``1,3,8-10`` (the index
      of each element is the number itself, as ``SLURM_ARRAY_TASK_ID``);
    - ``values``: a list; element i (index i) has parameter ``param`` (default ``value``) = values[i];
    - ``grid``: parameter name -> list of values; the elements are the product, in the order of the
      names as written then of the values (index 0, 1, ...).
    The shorthands ``array: "0-15%4"`` (a range, ``%4`` = max_running), ``array: [a, b]`` (values) and
    ``array: {lr: [..], bs: [..]}`` (a grid) are accepted and stored in this form.
    """

    range: str | None = Field(None, max_length=4096, description="Slurm --array syntax: 0-15, 0-15:2, 1,3,8-10.")
    values: list[ParamValue] | None = Field(None, min_length=1, max_length=MAX_ARRAY)
    param: ParamName = Field("value", description="The parameter name of `values` (TACC_PARAM_VALUE by default).")
    grid: dict[ParamName, list[ParamValue]] | None = Field(None, min_length=1, max_length=32)
    max_running: int | None = Field(None, ge=1, le=MAX_ARRAY,
                                    description="At most this many elements run at once (Slurm's %N).")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: object) -> object:
        from .arrays import array_shorthand

        return array_shorthand(data)

    @field_validator("range")
    @classmethod
    def _range(cls, v: str | None) -> str | None:
        """Syntax here, so that the error names array.range; counting is ``check_array``'s."""
        if v is not None:
            from .arrays import parse_range

            parse_range(v)
        return v

    @model_validator(mode="after")
    def _one(self) -> ArraySpec:
        given = [k for k in ("range", "values", "grid") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of array.range, array.values or array.grid")
        from .arrays import check_array

        check_array(self)
        return self


class ArrayElement(_Model):
    """Which element of an array a task is (set by the service when it expands an array; never written by hand)."""

    index: int = Field(ge=0, le=10**9, description="TACC_ARRAY_INDEX.")
    size: int = Field(ge=1, le=MAX_ARRAY, description="How many elements the array has (TACC_ARRAY_SIZE).")
    params: dict[ParamName, ParamValue] = Field(default_factory=dict, max_length=32,
                                                description="TACC_PARAM_<NAME>, and params.json.")

    @field_validator("params")
    @classmethod
    def _sorted(cls, v: dict[str, object]) -> dict[str, object]:
        return dict(sorted(v.items()))


TaskWhen = Literal["succeeded", "finished", "failed"]
ArrayWhen = Literal["all_succeeded", "all_finished", "any_finished"]


class Dependency(_Model):
    """Start only once another of the owner's tasks (``task``) or arrays (``array``) has ended as ``when`` says.

    task: succeeded (afterok), finished (afterany: any end), failed (afternotok: failed, lost or cancelled).
    array: all_succeeded, all_finished, any_finished. A dependency that can no longer be met ends the
    waiting task as cancelled, with the reason naming the task it waited on.
    """

    task: int | None = Field(None, ge=1, le=2**62)
    array: int | None = Field(None, ge=1, le=2**62)
    when: TaskWhen | ArrayWhen | None = Field(None, description="Default: succeeded (task), all_succeeded (array).")

    @model_validator(mode="after")
    def _check(self) -> Dependency:
        if (self.task is None) == (self.array is None):
            raise ValueError("give exactly one of task or array")
        when = self.when or ("succeeded" if self.task is not None else "all_succeeded")
        if self.task is not None and when not in ("succeeded", "finished", "failed"):
            raise ValueError(f"a task dependency's when is succeeded, finished or failed, not {when}")
        if self.array is not None and when not in ("all_succeeded", "all_finished", "any_finished"):
            raise ValueError(f"an array dependency's when is all_succeeded, all_finished or any_finished, not {when}")
        if self.when is None:
            object.__setattr__(self, "when", when)  # stored explicit: one canonical form
        return self


class TaskInput(_Model):
    """Files of an earlier task of the owner's, copied into this task's work directory before it starts.

    ``from`` names a pipeline step (the service resolves it to ``task`` or ``array`` when it submits the
    pipeline); a spec outside a pipeline names ``task`` (or ``array``: each element's files land under
    ``to/<index>/``). ``path`` is relative to that task's work directory; ``to`` (default: ``path``) to this one's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    from_: Name | None = Field(None, alias="from", description="A pipeline step's name.")
    task: int | None = Field(None, ge=1, le=2**62)
    array: int | None = Field(None, ge=1, le=2**62)
    path: RelPath = Field(description="In the producing task's work directory, e.g. outputs/data.")
    to: RelPath | None = Field(None, description="In this task's work directory; default: the same path.")

    @model_validator(mode="after")
    def _one(self) -> TaskInput:
        if sum(x is not None for x in (self.from_, self.task, self.array)) != 1:
            raise ValueError("give exactly one of from (a pipeline step), task or array")
        return self
