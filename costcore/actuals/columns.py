"""Names the actuals modules share: the slicing dimensions, the word for untagged rows, the money type."""
from __future__ import annotations

DIMENSIONS = ("project", "team", "model_version", "task_type", "stage", "resource_type")
UNATTRIBUTED = "unattributed"
MONEY_SQL = "DECIMAL(38, 12)"
COST_TABLE, JOBS_TABLE = "cost_rows", "jobs"
