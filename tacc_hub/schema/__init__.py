"""Task schema: what a task is, its digest, and the loaders for task files.

This package imports nothing else of tacc_hub and does no I/O.
"""

from .digest import canonical_json, spec_digest
from .errors import SpecError
from .jsonsafe import load_json
from .pipeline import PipelineSpec, Step, is_pipeline, load_pipeline, pipeline_from_data
from .tacc_yaml import load_tacc_yaml, spec_from_data
from .task import (
    Code,
    CondaSpec,
    Entrypoint,
    Environment,
    GitCode,
    LocalCode,
    Network,
    QoS,
    Resources,
    Runtime,
    SnapshotCode,
    TaskSpec,
)
from .tuxiv import load_tuxiv, parse_sbatch, spec_from_tuxiv
from .yamlsafe import load_yaml


def json_schema() -> dict[str, object]:
    """JSON Schema of a task file, for editors (``tcloud schema``)."""
    schema = TaskSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tacc_hub task (tacc.yaml)"
    return schema


__all__ = [
    "Code", "CondaSpec", "Entrypoint", "Environment", "GitCode", "LocalCode", "Network", "PipelineSpec", "QoS",
    "Resources", "Runtime", "SnapshotCode", "SpecError", "Step", "TaskSpec", "canonical_json", "is_pipeline",
    "json_schema", "load_json", "load_pipeline", "load_tacc_yaml", "load_tuxiv", "load_yaml", "parse_sbatch",
    "pipeline_from_data", "spec_digest", "spec_from_data", "spec_from_tuxiv",
]
