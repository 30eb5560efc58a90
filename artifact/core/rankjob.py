"""RankJob: what every rank of one `run FIG` is asked to do, as one JSON document.

The launcher (artifact.launch) builds it from its RunRequest once the folder is claimed,
and hands it to torchrun as the worker's one argument; the worker (artifact.rank.worker)
parses it once. It sits here, below both, because the two never import each other
(docs/design.md section 2, "The process boundary").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from artifact.core.errors import ArtifactError, bad_choice
from artifact.core.options import RunOptions

DEVICES = ("cpu", "cuda", "rocm")  # a rank's device: this machine's kind, never "auto"
KEYS = ("figure", "preset", "device", "out", "reps", "options")  # the document's, all needed


@dataclass(frozen=True)
class RankJob:
    figure: str  # whose records the ranks write (fig5's are fig4's)
    preset: str  # the preset's name (artifact.core.config.get_preset)
    device: str  # one of DEVICES
    out: Path  # the output folder, claimed by the launcher
    reps: int  # the repetitions the folder's plan asks for
    options: RunOptions = field(default_factory=RunOptions)

    def __post_init__(self):
        if self.device not in DEVICES:
            raise bad_choice("device", self.device, DEVICES)

    def to_json(self) -> str:
        """One line of JSON: the worker's `--job` value."""
        return json.dumps(
            {
                "figure": self.figure,
                "preset": self.preset,
                "device": self.device,
                "out": str(self.out),
                "reps": self.reps,
                "options": self.options.as_json(),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> RankJob:
        """The job `to_json` wrote; a document with a key missing or unknown is refused."""
        data: dict[str, Any] = json.loads(text)
        if unknown := sorted(set(data) - set(KEYS)):
            raise bad_choice("rank job key", unknown[0], KEYS)
        if missing := [k for k in KEYS if k not in data]:
            raise ArtifactError(f"the rank job lacks {', '.join(missing)}: {text[:200]}")
        return cls(
            figure=data["figure"],
            preset=data["preset"],
            device=data["device"],
            out=Path(data["out"]),
            reps=int(data["reps"]),
            options=RunOptions.from_json(data["options"]),
        )
