"""The record every periodic part of glueinfo keeps of itself: a job, a collector, an output."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class JobStats:
    """One job's (or collector's, or output's) record, published as self-metrics."""

    runs: int = 0
    failures: int = 0
    last_duration_s: Optional[float] = None
    last_started_at: Optional[float] = None
    last_success_at: Optional[float] = None
    last_error: Optional[str] = None
    overruns: int = 0  # a run due while the previous one still ran (skipped)
    missed: int = 0  # a run too late to start (past misfire grace)

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}
